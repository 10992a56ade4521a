"""A tensor-parallel rank reads only its shards from the checkpoint: a sharded load equals a full load followed by
slicing (a pure copy: exactly), LoRAs are fused into the shards, and each rank reads about half the block bytes."""

from __future__ import annotations

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_transformer
from support.checkpoints import write_checkpoint
from support.model_files import write_lora
from support.ranks import run_ranks


def test_tp2_sharded_load_equals_sliced_full_load(tmp_path):
    config = TransformerConfig.tiny("2.3")
    checkpoint = write_checkpoint(tmp_path / "tiny.safetensors", demo_transformer(config, seed=3).state_dict(), config)
    lora = write_lora(tmp_path / "lora.safetensors", seed=5, version="2.3")
    for result in run_ranks("load_rank.py", 2, tmp_path, str(checkpoint), str(lora)):
        plain, fused = result["plain"], result["lora"]
        assert plain["keys_equal"] and plain["shards"] > 0
        assert plain["diff"] == 0  # the shard is a copy of its part of the file's tensor
        assert fused["diff"] <= 1e-6  # W[rows] + B[rows]·A vs (W + B·A)[rows]: the same sums, other blocking
        assert plain["block_read_ratio"] <= 0.55 and plain["read_ratio"] < 1
