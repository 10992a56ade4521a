"""Sigma schedules vs the reference `LTX2Scheduler` and the distilled tables (spec §6)."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.sampling import DISTILLED_SIGMAS, STAGE2_SIGMAS, ltx2_sigmas, sigma_table
from support.reference import import_ltx_core

# the reference's formula in the same fp32 ops; sigmas lie in [0, 1], where fp32 rounding is below 6e-8, while a wrong
# shift, stretch or step count moves them by more than 1e-3
SAME_FORMULA = dict(atol=1e-6, rtol=0)


def _reference(steps, latent=None, **kwargs):
    import_ltx_core()
    from ltx_core.components.schedulers import LTX2Scheduler

    return LTX2Scheduler().execute(steps, latent=latent, **kwargs)


@pytest.mark.parametrize("steps", [1, 2, 8, 30, 40])
def test_default_schedule_equals_the_reference(steps):
    ours = ltx2_sigmas(steps)
    torch.testing.assert_close(ours, _reference(steps), **SAME_FORMULA)
    assert ours[-1] == 0 and ours.dtype == torch.float32  # the last sigma is set to 0, not computed
    # the last non-zero sigma is stretched to 0.1, so a 1-step schedule starts at 0.1 (as in the reference)
    torch.testing.assert_close(ours[-2], torch.tensor(0.1))
    if steps > 1:
        torch.testing.assert_close(ours[0], torch.tensor(1.0))
        assert bool((ours[1:] < ours[:-1]).all())


@pytest.mark.parametrize("shape", [(1, 128, 16, 24, 40), (1, 128, 4, 8, 12)])
def test_token_dependent_shift_equals_the_reference(shape):
    tokens = shape[2] * shape[3] * shape[4]
    torch.testing.assert_close(ltx2_sigmas(20, tokens), _reference(20, torch.zeros(shape)), **SAME_FORMULA)
    assert (ltx2_sigmas(20, tokens) - ltx2_sigmas(20)).abs().max() > 1e-3  # the token count shifts the schedule


def test_unstretched_schedule_equals_the_reference():
    torch.testing.assert_close(ltx2_sigmas(10, terminal=None), _reference(10, stretch=False), **SAME_FORMULA)


def test_forty_steps_match_the_spec():
    sigmas = ltx2_sigmas(40)
    expected = torch.tensor([1.0, 0.9964, 0.9927, 0.9889])
    torch.testing.assert_close(sigmas[:4], expected, atol=1e-4, rtol=0)
    torch.testing.assert_close(sigmas[-4:], torch.tensor([0.3378, 0.2339, 0.1, 0.0]), atol=1e-4, rtol=0)


def test_distilled_tables():
    assert len(DISTILLED_SIGMAS) == 9 and len(STAGE2_SIGMAS) == 4
    assert DISTILLED_SIGMAS[-4:] == STAGE2_SIGMAS and STAGE2_SIGMAS[0] == 0.909375  # literals of the same table
    table = sigma_table(STAGE2_SIGMAS)
    assert table.dtype == torch.float32
    # a float64 -> float32 cast of literals, rounded once either way: a pure conversion, exact
    torch.testing.assert_close(table, torch.tensor(STAGE2_SIGMAS, dtype=torch.float64).float(), atol=0, rtol=0)


@pytest.mark.parametrize("steps", [0, -3, 2.5, True])
def test_bad_step_counts_are_rejected(steps):
    with pytest.raises(ValueError, match="steps must be an integer ≥ 1"):
        ltx2_sigmas(steps)
