"""Tensor parallelism over real torch.distributed ranks (gloo, CPU): the sharded transformer computes the
single-process forward and sampling run, with only the predicted all-reduces and no all-gather."""

from __future__ import annotations

from ltx2_core.parallel.tensor_parallel import ALL_REDUCES_PER_BLOCK
from support.ranks import run_ranks


def test_tp2_equals_one_process_with_the_predicted_collectives(tmp_path):
    results = run_ranks("tp_rank.py", 2, tmp_path)
    for result in results:
        assert result["forward_diff"] <= 1e-5, result  # fp32
        assert result["sampling_diff"] <= 1e-4, result  # a 3-step guided run with all four passes
        assert result["collectives"] == {"c10d_functional.all_reduce": ALL_REDUCES_PER_BLOCK * result["blocks"]}
        assert result["block_bytes"] <= 0.55 * result["full_block_bytes"]
        assert result["released_ratio"] <= 0.55  # per-rank parameter bytes of the released LTX-2.3 transformer
