"""CFG-parallel over real torch.distributed ranks (gloo, CPU, one process per rank): the guidance passes are split
over the ranks and one all-gather per step gives every rank the single-process result."""

from __future__ import annotations

import pytest

from support.ranks import run_ranks


@pytest.mark.parametrize("guidance, shares", [
    ("full", [["cond", "uncond"], ["perturbed", "isolated"]]),
    ("three", [["cond", "uncond"], ["perturbed"]]),  # uneven shares: the gather pads and drops a row
])
def test_cfg2_equals_one_process_with_one_gather_per_step(tmp_path, guidance, shares):
    results = run_ranks("cfg_rank.py", 2, tmp_path, guidance)
    assert [r["local_passes"] for r in results] == shares
    for result in results:
        assert result["diff"] <= 1e-4, result  # a 3-step guided run, fp32
        assert sum(result["collectives"].values()) == 1 and "all_gather" in next(iter(result["collectives"]))
