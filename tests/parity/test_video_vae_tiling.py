"""Tiled video decoding: same geometry and blend as the reference's `tiled_decode`, and what tiling changes.

Tiles here are the smallest the configuration allows (64 px / 32 px overlap, 16 frames / 8 overlap), so a tiny
latent of 5×4×6 is cut into 4×3×5 tiles and every seam and ramp is exercised.
"""

from __future__ import annotations

import pytest
import torch

from ltx2_core.model.video_vae.tiling import TilingConfig, decode_video, tile_axes
from support.configs import TINY_VAES
from support.reference import import_ltx_core
from support.video_vae import video_vae_pair

SMALL = TilingConfig(spatial_tile=64, spatial_overlap=32, temporal_tile=16, temporal_overlap=8)
LATENT = (2, 16, 5, 4, 6)


def _latent(seed=1):
    return torch.randn(LATENT, generator=torch.Generator().manual_seed(seed))


def _reference_tiled(ref, latent):
    import_ltx_core()
    from ltx_core.model.video_vae.tiling import SpatialTilingConfig, TemporalTilingConfig
    from ltx_core.model.video_vae.tiling import TilingConfig as RefTiling

    config = RefTiling(SpatialTilingConfig(SMALL.spatial_tile, SMALL.spatial_overlap),
                       TemporalTilingConfig(SMALL.temporal_tile, SMALL.temporal_overlap))
    return torch.cat(list(ref.tiled_decode(latent, config)), dim=2)


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_tiled_decode_matches_reference_tiled_decode(version):
    # atol=rtol=1e-5: same per-tile fp32 decoder (see test_video_vae_parity) and the same blend weights; ours are
    # normalised per axis before blending instead of dividing by the accumulated weights afterwards (~1e-7)
    ours, ref = video_vae_pair(TINY_VAES[version], "decoder")
    latent = _latent()
    got = decode_video(latent, ours, SMALL)
    want = _reference_tiled(ref, latent)
    assert got.shape == want.shape == (2, 3, 33, 128, 192)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_tiling_is_exact_for_a_decoder_that_sees_no_neighbours():
    """With only the centre tap of every 3×3×3 kernel the decoder maps each latent cell to its own pixels, so any
    difference between tiled and untiled decoding would come from tile placement or blend weights: atol 1e-5
    (fp32 rounding of the weighted sums). Real decoders see ~6 latents around a pixel, more than the overlap,
    so there tiling changes the seams (by design, in the reference too) and the blend ramps hide it."""
    ours, _ = video_vae_pair(TINY_VAES["2.0"], "decoder")
    for name, tensor in ours.state_dict().items():
        if name.endswith("conv.weight"):
            centre = tensor[:, :, 1, 1, 1].clone()
            tensor.zero_()[:, :, 1, 1, 1] = centre
    latent = _latent(2)
    tiled, whole = decode_video(latent, ours, SMALL), decode_video(latent, ours, None)
    assert [len(p.latent) for p in tile_axes(LATENT[2:], SMALL)] == [4, 3, 5]
    torch.testing.assert_close(tiled, whole, atol=1e-5, rtol=1e-5)
    assert whole.abs().max() > 0.1


def test_untiled_decode_video_is_the_decoder_forward():
    ours, _ = video_vae_pair(TINY_VAES["2.3"], "decoder")
    latent = _latent(3)
    torch.testing.assert_close(decode_video(latent, ours, None), ours(latent), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("size", [(16, 24, 40), (5, 4, 6), (1, 3, 7), (17, 17, 9)])
def test_blend_weights_cover_the_output_and_sum_to_one(size):
    """For the default tiles (a 121-frame 768×1280 video is the first case) and small ones."""
    for tiling in (TilingConfig(), SMALL):
        for axis, plan in enumerate(tile_axes(size, tiling)):
            total = torch.zeros(plan.output[-1].stop)
            for latent, out, weights in zip(plan.latent, plan.output, plan.weights):
                assert weights.shape[0] == out.stop - out.start
                scale = 8 if axis == 0 else 32
                cells = latent.stop - latent.start
                expected = 1 + (cells - 1) * 8 if axis == 0 else cells * scale
                assert out.stop - out.start == expected
                total[out] += weights
            torch.testing.assert_close(total, torch.ones_like(total))


def test_default_tiles_for_a_long_1280x768_video():
    time, rows, cols = tile_axes((31, 24, 40), TilingConfig())  # 241 frames
    assert (len(time.latent), len(rows.latent), len(cols.latent)) == (6, 3, 3)
    assert max(s.stop - s.start for s in cols.latent) <= 16 and max(s.stop - s.start for s in time.latent) <= 9


@pytest.mark.parametrize("kwargs", [dict(spatial_tile=48), dict(spatial_tile=512, spatial_overlap=512),
                                    dict(spatial_overlap=48), dict(temporal_tile=12), dict(temporal_overlap=20)])
def test_bad_tiling_is_rejected(kwargs):
    with pytest.raises(ValueError, match="multiples of"):
        TilingConfig(**kwargs)
