"""CFG-parallel in one process: the passes spread over model replicas (here two on the CPU) give the single-device
result, with no host sync per step."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.parallel.cfg_parallel import ReplicatedCfg, replicate, shares
from ltx2_core.sampling import guided_step, ltx2_sigmas
from support import cfg_case
from support.census import OpCensus


def test_shares_are_contiguous_and_balanced():
    assert shares(4, 2) == [slice(0, 2), slice(2, 4)]
    assert shares(3, 2) == [slice(0, 2), slice(2, 3)]
    assert shares(4, 3) == [slice(0, 2), slice(2, 3), slice(3, 4)]


@pytest.mark.parametrize("guidance", [cfg_case.FULL, cfg_case.THREE], ids=["4-passes", "3-passes"])
def test_replicas_give_the_single_device_result(guidance):
    model = cfg_case.model()
    want = cfg_case.run(cfg_case.plan(model, guidance))
    replicas = replicate(model, ["cpu", "cpu"])
    assert replicas[0] is model and replicas[1] is not model
    plan = cfg_case.plan(model, guidance, runner=ReplicatedCfg(replicas))
    assert [r.passes for r in plan.runner.runners] == [plan.runner.passes[:2], plan.runner.passes[2:]]
    got = cfg_case.run(plan)
    torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[1], want[1], atol=1e-5, rtol=1e-5)
    video, audio = cfg_case.states()
    sigmas = ltx2_sigmas(3)
    with OpCensus() as census:
        guided_step(plan, video, audio, sigmas[0], sigmas[1])
    assert census.syncs() == {} and census.transfers() == 0


def test_the_plan_must_be_made_for_the_first_replica():
    model = cfg_case.model()
    replicas = replicate(model, ["cpu", "cpu"])
    with pytest.raises(ValueError, match="first replica"):
        cfg_case.plan(replicas[1], runner=ReplicatedCfg(replicas))
