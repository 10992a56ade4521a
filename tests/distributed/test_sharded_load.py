"""A tensor-parallel rank reads only its shards from the checkpoint: a sharded load equals a full load followed by
slicing (a pure copy: exactly), LoRAs are fused into the shards, and each rank reads about half the block bytes."""

from __future__ import annotations

import pytest

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_transformer
from support.checkpoints import write_checkpoint
from support.model_files import write_lora
from support.ranks import run_ranks
from support.transformer25 import write_transformer25


@pytest.mark.parametrize("version", ["2.3", "2.5"])
def test_tp2_sharded_load_equals_sliced_full_load(tmp_path, version):
    """2.3 from its bundle; 2.5 from its transformer file (feed-forwards without biases)."""
    config = TransformerConfig.tiny(version)
    write = write_checkpoint if version == "2.3" else write_transformer25
    checkpoint = write(tmp_path / "tiny.safetensors", demo_transformer(config, seed=3).state_dict(), config)
    lora = write_lora(tmp_path / "lora.safetensors", seed=5, version=version)
    for result in run_ranks("load_rank.py", 2, tmp_path, str(checkpoint), str(lora)):
        plain, fused = result["plain"], result["lora"]
        assert plain["keys_equal"] and plain["shards"] > 0
        assert plain["diff"] == 0  # the shard is a copy of its part of the file's tensor
        assert fused["diff"] <= 1e-6  # W[rows] + B[rows]·A vs (W + B·A)[rows]: the same sums, other blocking
        assert plain["block_read_ratio"] <= 0.55 and plain["read_ratio"] < 1


def test_an_fp8_checkpoint_loads_tensor_parallel_in_fp8_shards(tmp_path):
    """Each rank reads its fp8 shards (half of each block matrix) and keeps them fp8; the forward equals the whole
    fp8 model's; a LoRA is fused per shard (re-quantised with the shard's own scale), so within fp8 rounding."""
    from support.fp8_files import write_fp8_checkpoint

    config = TransformerConfig.tiny("2.3")
    source = write_checkpoint(tmp_path / "tiny.safetensors", demo_transformer(config, seed=3).state_dict(), config)
    checkpoint = write_fp8_checkpoint(source, tmp_path / "tiny-fp8.safetensors", "official")
    lora = write_lora(tmp_path / "lora.safetensors", seed=5, version="2.3")
    for result in run_ranks("fp8_tp_rank.py", 2, tmp_path, str(checkpoint), str(lora)):
        plain, fused = result["plain"], result["lora"]
        assert plain["fp8_layers"] == plain["fp8_layers_whole"] > 0
        assert plain["fp8_bytes"] * 2 == plain["fp8_bytes_whole"]  # every fp8 matrix halved, still fp8
        assert plain["diff"] <= 1e-5 * max(1.0, plain["scale"])  # the same dequantised products, other sums
        assert fused["diff"] <= 0.05 * fused["scale"]  # per-shard re-quantisation: fp8 rounding differs
