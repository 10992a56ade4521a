"""Our latent upsampler vs the reference `ltx_core` LatentUpsampler: same tiny config, same random weights, fp32.
The spatial and temporal forms against 1.0.0 in this Python; the temporal form also against 1.2.0 (DFR's release;
its upsampler module differs from 1.0.0's only by a Disposable base class) in its own Python.

Tolerance atol=rtol=1e-5: both sides run the same fp32 convolutions, GroupNorms and pixel shuffles in the same
order; only the per-frame reshapes differ (einops vs view), which do not change the arithmetic (measured 0).
"""

from __future__ import annotations

import json
import types

import pytest
import torch
from safetensors.torch import save_file

from ltx2_core.loader.upsampler_weights import load_upsampler
from ltx2_core.model.statistics import PerChannelStatistics
from ltx2_core.model.upsampler import LatentUpsampler, UpsamplerConfig, upsample_latent
from support.reference import import_ltx_core
from support.reference120 import run_reference

TOL = dict(atol=1e-5, rtol=1e-5)
KERNEL = "upsampler.blur_down.kernel"
CASES = {
    "rational-x2": UpsamplerConfig.tiny(rational_resampler=True),  # LTX-2.0 x2-1.0 structure
    "plain-x2": UpsamplerConfig.tiny(rational_resampler=False),  # LTX-2.3 x2-1.1 structure
    "rational-x1.5-2blocks": UpsamplerConfig(in_channels=16, mid_channels=32, num_blocks_per_stage=2,
                                             spatial_scale=1.5, rational_resampler=True),
    "rational-x0.75": UpsamplerConfig.tiny(rational_resampler=True, spatial_scale=0.75),
    "rational-x4": UpsamplerConfig.tiny(rational_resampler=True, spatial_scale=4.0),
    "temporal-x2": UpsamplerConfig.tiny(temporal=True),  # DFR's frame-doubling form (ltx-core 1.0.0 has it too)
}


def _reference(config: UpsamplerConfig, seed: int) -> torch.nn.Module:
    """The reference model from the same metadata, with random weights (GroupNorm scales near 1) and the binomial."""
    import_ltx_core()
    from ltx_core.model.upsampler import LatentUpsamplerConfigurator

    ref = LatentUpsamplerConfigurator.from_config(config.to_metadata()).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # module-scoped fixtures run outside the per-test no_grad of conftest
        for name, param in ref.named_parameters():
            noise = torch.randn(param.shape, generator=g) * 0.1
            param.copy_(noise + 1 if ".weight" in name and "norm" in name else noise)
    return ref


def _weights(ref: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The reference state dict without the blur kernel, which ours recomputes instead of storing."""
    return {k: v.clone() for k, v in ref.state_dict().items() if k != KERNEL}


def _statistics(channels: int, seed: int) -> tuple[PerChannelStatistics, torch.nn.Module]:
    import_ltx_core()
    from ltx_core.model.video_vae.ops import PerChannelStatistics as RefStatistics

    g = torch.Generator().manual_seed(seed)
    state = {"mean-of-means": torch.randn(channels, generator=g),
             "std-of-means": torch.rand(channels, generator=g) + 0.5}
    ours, ref = PerChannelStatistics(channels), RefStatistics(channels)
    ours.load_state_dict(state, strict=True)
    ref.load_state_dict(state, strict=True)
    return ours, ref


def _latent(config: UpsamplerConfig, seed: int = 3) -> torch.Tensor:
    """(2, C, 3, 4, 6): batch 2 and 3 frames so that the per-frame reshapes are exercised; W != H."""
    return torch.randn(2, config.in_channels, 3, 4, 6, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module", params=list(CASES))
def models(request):
    config = CASES[request.param]
    ref = _reference(config, seed=1)
    ours = LatentUpsampler(config).eval()
    ours.load_state_dict(_weights(ref), strict=True)
    return config, ours, ref


def test_forward_matches_reference(models):
    config, ours, ref = models
    x = _latent(config)
    expected = ref(x)
    out = ours(x)
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, **TOL)


def test_upsample_latent_matches_reference_upsample_video(models):
    from ltx_core.model.upsampler import upsample_video

    config, ours, ref = models
    stats, ref_stats = _statistics(config.in_channels, seed=5)
    x = _latent(config, seed=4)
    expected = upsample_video(x, types.SimpleNamespace(per_channel_statistics=ref_stats), ref)
    torch.testing.assert_close(upsample_latent(x, ours, stats), expected, **TOL)


def test_rational_x2_equals_plain_x2_with_the_same_conv():
    """At scale 2 the blur is skipped, so the two released forms compute the same function (spec §5)."""
    rational = _reference(CASES["rational-x2"], seed=2)
    plain = LatentUpsampler(CASES["plain-x2"]).eval()
    renamed = {k.replace("upsampler.conv.", "upsampler.0."): v for k, v in _weights(rational).items()}
    plain.load_state_dict(renamed, strict=True)
    x = _latent(CASES["plain-x2"])
    torch.testing.assert_close(plain(x), rational(x), **TOL)


@pytest.mark.parametrize("with_kernel", [True, False], ids=["with-kernel", "without-kernel"])
@pytest.mark.parametrize("case", ["rational-x2", "rational-x1.5-2blocks"])
def test_file_loads_with_or_without_the_blur_kernel(tmp_path, case, with_kernel):
    """The released x2-1.0 file stores `upsampler.blur_down.kernel`; a re-saved file may not. Both must load."""
    config = CASES[case]
    ref = _reference(config, seed=6)
    tensors = {k: v.contiguous() for k, v in ref.state_dict().items() if with_kernel or k != KERNEL}
    path = tmp_path / "upsampler.safetensors"
    save_file(tensors, path, metadata={"config": json.dumps(config.to_metadata())})
    loaded = load_upsampler(path)
    assert loaded.config == config
    assert not loaded.upsampler.blur_down.kernel.is_meta
    x = _latent(config, seed=8)
    torch.testing.assert_close(loaded(x), ref(x), **TOL)


def test_plain_file_loads_and_matches(tmp_path):
    config = CASES["plain-x2"]
    ref = _reference(config, seed=9)
    path = tmp_path / "upsampler.safetensors"
    save_file({k: v.contiguous() for k, v in ref.state_dict().items()}, path,
              metadata={"config": json.dumps(config.to_metadata())})
    x = _latent(config, seed=10)
    torch.testing.assert_close(load_upsampler(path)(x), ref(x), **TOL)


def test_temporal_form_matches_ltx_core_120(tmp_path):
    config = CASES["temporal-x2"]
    ref = _reference(config, seed=11)
    ours = LatentUpsampler(config).eval()
    ours.load_state_dict(_weights(ref), strict=True)
    stats, _ = _statistics(config.in_channels, seed=12)
    x = _latent(config, seed=13)
    tensors = {"latent": x, **{"w." + k: v for k, v in _weights(ref).items()},
               **{"s." + k: v for k, v in stats.state_dict().items()}}
    expected = run_reference("temporal_upsampler.py", tensors, {"config": json.dumps(config.to_metadata())}, tmp_path)
    out = ours(x)
    assert out.shape == (2, config.in_channels, 5, 4, 6)  # 3 frames -> 2·3 - 1
    torch.testing.assert_close(out, expected["forward"], **TOL)
    torch.testing.assert_close(upsample_latent(x, ours, stats), expected["upsampled"], **TOL)
