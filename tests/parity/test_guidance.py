"""Multimodal guidance vs the reference `MultiModalGuider.calculate`; dropped passes; no recompiles on new scales.

Tolerance atol=rtol=1e-5: same fp32 arithmetic in another association order, plus the rescale's ε = 1e-6 against
standard deviations ~1 (relative effect ~1e-6).
"""

from __future__ import annotations

import pytest
import torch

from ltx2_core.sampling.guidance import GuidanceParams, active_passes, guidance_weights, guide
from support.reference import import_ltx_core

SETTINGS = [
    GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(29,), rescale=0.7, modality=3.0),  # LTX-2 video defaults
    GuidanceParams(cfg=7.0, stg=1.0, stg_blocks=(29,), rescale=0.7, modality=3.0),  # audio defaults
    GuidanceParams(cfg=3.0, rescale=0.45, modality=3.0),  # 2.3 HQ: no STG
    GuidanceParams(cfg=4.0),
    GuidanceParams(),
]


def _reference(params: GuidanceParams, cond, uncond, perturbed, isolated):
    import_ltx_core()
    from ltx_core.components.guiders import MultiModalGuider, MultiModalGuiderParams

    ref = MultiModalGuider(MultiModalGuiderParams(cfg_scale=params.cfg, stg_scale=params.stg,
                                                  stg_blocks=list(params.stg_blocks), rescale_scale=params.rescale,
                                                  modality_scale=params.modality))
    return ref.calculate(cond, uncond, perturbed, isolated)


@pytest.mark.parametrize("params", SETTINGS)
def test_guidance_equals_the_reference(params):
    g = torch.Generator().manual_seed(0)
    all_passes = {name: torch.randn(1, 24, 128, generator=g) for name in ("cond", "uncond", "perturbed", "isolated")}
    passes = active_passes(params)
    stacked = torch.stack([all_passes[name] for name in passes])
    got = guide(stacked, guidance_weights(params, passes))
    want = _reference(params, *all_passes.values())
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_neutral_passes_are_dropped_at_setup():
    video, audio = SETTINGS[2], GuidanceParams(cfg=7.0)
    assert active_passes(video, audio) == ("cond", "uncond", "isolated")
    assert active_passes(GuidanceParams(), GuidanceParams()) == ("cond",)
    assert active_passes(GuidanceParams(), GuidanceParams(stg=1.0)) == ("cond", "perturbed")
    # a modality whose own scale is neutral gets weight 0 for a pass the other modality needs
    weights = guidance_weights(GuidanceParams(), active_passes(GuidanceParams(), audio))
    assert weights.terms.tolist() == [0.0]  # 1 − 1: exact


def test_batched_samples_are_guided_independently():
    """Each sample's rescale uses its own standard deviations, as B=1 reference calls would."""
    params = SETTINGS[0]
    passes = active_passes(params)
    g = torch.Generator().manual_seed(1)
    predictions = torch.randn(len(passes), 3, 10, 16, generator=g) * torch.tensor([1.0, 5.0, 0.2]).view(1, 3, 1, 1)
    batched = guide(predictions, guidance_weights(params, passes))
    for b in range(3):
        single = guide(predictions[:, b : b + 1], guidance_weights(params, passes))
        torch.testing.assert_close(batched[b : b + 1], single, atol=1e-6, rtol=1e-6)


def test_constant_prediction_stays_finite():
    params = SETTINGS[0]
    passes = active_passes(params)
    out = guide(torch.ones(len(passes), 1, 4, 8), guidance_weights(params, passes))
    assert bool(torch.isfinite(out).all())


def test_changing_every_scale_does_not_recompile():
    torch._dynamo.reset()
    compiled = torch.compile(guide, backend="eager", fullgraph=True)
    passes = active_passes(SETTINGS[0])
    predictions = torch.randn(len(passes), 1, 6, 8)
    from torch._dynamo.utils import counters

    counters.clear()
    for params in (SETTINGS[0], GuidanceParams(cfg=5.5, stg=0.3, rescale=0.1, modality=2.0), SETTINGS[1]):
        compiled(predictions, guidance_weights(params, passes))
    assert counters["stats"]["unique_graphs"] == 1


@pytest.mark.parametrize("kwargs", [dict(cfg=-1.0), dict(stg=-0.5), dict(rescale=-0.1), dict(modality=float("nan"))])
def test_negative_scales_are_rejected(kwargs):
    with pytest.raises(ValueError, match="must be ≥ 0"):
        GuidanceParams(**kwargs)
