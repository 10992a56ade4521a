"""Every parallel layout over real ranks (gloo, CPU) gives the single-process transformer: the forward (also at a
video token count that is not a multiple of sp, there also with attention weights: a weighted IC-LoRA control's log
bias) and a 3-step guided sampling run with all four passes, with and without attention weights; the collectives
per forward are the ones the design predicts."""

from __future__ import annotations

import pytest

from ltx2_core.parallel.sequence_parallel import COLLECTIVES_PER_BLOCK
from ltx2_core.parallel.tensor_parallel import ALL_REDUCES_PER_BLOCK
from support.ranks import run_ranks


@pytest.mark.parametrize("shape, version", [("1x2x1", "2.3"), ("2x2x1", "2.3"), ("1x2x2", "2.3"), ("1x2x2", "2.5")],
                         ids=["SP2", "CFG2xSP2", "TP2xSP2", "TP2xSP2-2.5"])
def test_layout_equals_one_process(tmp_path, shape, version):
    cfg, sp, tp = (int(n) for n in shape.split("x"))
    results = run_ranks("layout_rank.py", cfg * sp * tp, tmp_path, shape, version)
    for result in results:
        blocks = result["blocks"]
        # 2.5's text keys come from the run's cache: its two text cross-attentions norm no keys in the forward
        all_reduces = ALL_REDUCES_PER_BLOCK - (2 if result["cached_text_kv"] else 0)
        for name, forward in result["forward"].items():
            assert forward["diff"] <= 1e-5, (name, forward)  # fp32
            expected = {}
            if sp > 1:  # per block: all-to-all in and out of video self-attention, the v2a key gather; the output
                expected["c10d_functional.all_to_all_single"] = 2 * blocks
                expected["c10d_functional.all_gather_into_tensor"] = blocks + 1
            if tp > 1:
                expected["c10d_functional.all_reduce"] = all_reduces * blocks
            assert forward["collectives"] == expected, (name, forward)
            assert sum(expected.values()) == (COLLECTIVES_PER_BLOCK * blocks + 1 if sp > 1 else 0) + (
                all_reduces * blocks if tp > 1 else 0)
        assert result["forward"]["odd"]["tokens"] % sp  # the odd case really is not a multiple of sp
        assert result["sampling_diff"] <= 1e-4, result
        assert result["weighted_sampling_diff"] <= 1e-4, result  # a weighted IC-LoRA control's attention bias
