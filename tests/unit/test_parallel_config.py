"""The parallel layout: validated before any rank starts, with the fix named; a default layout per GPU count."""

from __future__ import annotations

import pytest

from ltx2_core.parallel import ParallelConfig, ParallelConfigError, default_layout

GB = 2**30


@pytest.mark.parametrize("layout, facts, message", [
    (dict(cfg=2, sp=2), dict(world_size=2), "cfg 2 × sp 2 × tp 1 needs 4 ranks, but 2 were started"),
    (dict(sp=4), dict(devices=2), "only 2 are visible"),
    (dict(sp=2, tp=3), dict(heads=(32, 32)), "tp·sp = 6 must divide the 32 attention heads"),
    (dict(cfg=2), dict(passes=1), "cfg 2 exceeds the 1 guidance passes"),
])
def test_invalid_layouts_name_the_fix(layout, facts, message):
    with pytest.raises(ParallelConfigError, match=message):
        ParallelConfig(**layout).check(**facts)


def test_every_problem_is_reported_at_once_and_a_good_layout_passes():
    with pytest.raises(ParallelConfigError) as error:
        ParallelConfig(cfg=4, tp=3).check(world_size=8, devices=8, heads=(32,), passes=2)
    assert str(error.value).count("\n  - ") == 4  # ranks, devices, heads, passes
    assert ParallelConfig(2, 2, 2).check(world_size=8, devices=8, heads=(32, 32), passes=4).world_size == 8
    with pytest.raises(ParallelConfigError, match="integers ≥ 1"):
        ParallelConfig(cfg=0)


@pytest.mark.parametrize("devices, passes, weights, free, expected", [
    (1, 4, 37 * GB, 80 * GB, (1, 1, 1)),
    (2, 4, 37 * GB, 80 * GB, (2, 1, 1)),  # CFG-parallel first
    (4, 4, 37 * GB, 80 * GB, (4, 1, 1)),
    (8, 4, 37 * GB, 80 * GB, (4, 2, 1)),  # then Ulysses
    (4, 1, 37 * GB, 80 * GB, (1, 4, 1)),  # distilled: one pass, all Ulysses
    (2, 4, 37 * GB, 24 * GB, (1, 1, 2)),  # 24 GB cards: tensor parallel so the weights fit
    (8, 4, 44 * GB, 24 * GB, (2, 1, 4)),  # 22 GB per card at tp 2 is over 80% of 24: tp 4
])
def test_default_layout(devices, passes, weights, free, expected):
    assert default_layout(devices, passes, weights, free).shape == expected
