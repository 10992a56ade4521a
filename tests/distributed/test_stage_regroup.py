"""A cfg layout regroups per stage (`parallel.stage_regroup`): a stage with fewer guidance passes than cfg ranks
splits its video tokens over the cfg (and sp) ranks together instead of running whole on every rank, and the next
guided stage splits the passes again; every stage equals the whole model in one process, no weight moves."""

from __future__ import annotations

import pytest

from support.ranks import run_ranks


@pytest.mark.parametrize("shape", ["2x1x1", "2x1x2"], ids=["CFG2", "CFG2xTP2"])
def test_each_stage_runs_in_its_layout_and_equals_one_process(tmp_path, shape):
    cfg, sp, tp = (int(n) for n in shape.split("x"))
    for result in run_ranks("regroup_rank.py", cfg * sp * tp, tmp_path, shape):
        stages = result["stages"]
        assert result["regroups"] and not result["weights_moved"], result
        for name, stage in stages.items():
            assert stage["diff"] <= 1e-4, (name, stage)  # fp32, 3 steps
        assert stages["guided"]["split_over"] is None  # cfg splits the 4 passes; the tokens stay whole
        assert "all_to_all_single" not in stages["guided"]["collectives"]
        assert stages["unguided"]["split_over"] == cfg * sp  # 1 pass: the cfg ranks split the tokens (Ulysses)
        assert stages["unguided"]["collectives"]["all_to_all_single"] > 0
        assert stages["guided again"]["split_over"] is None
        assert stages["guided again"]["collectives"] == stages["guided"]["collectives"]
