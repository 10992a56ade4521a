"""Our video VAE vs the reference `ltx_core` VideoDecoder / VideoEncoder: tiny configs, same random weights, fp32.

Tolerance atol=rtol=1e-5: the same fp32 convolutions run on both sides; what differs is the pixel norm (a vector
norm instead of mean(x²), rsqrt instead of division) and elementwise association, measured ≤ 4e-6 on outputs of
magnitude ~3 (weights N(0, 1/fan-in), so activations stay O(1) through every stage).
"""

from __future__ import annotations

import pytest
import torch

from support.configs import TINY_VAE, TINY_VAES
from support.video_vae import video_vae_pair

TOL = dict(atol=1e-5, rtol=1e-5)


def _latent(shape, seed=1):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_decoder_matches_reference(version):
    ours, ref = video_vae_pair(TINY_VAES[version], "decoder")
    latent = _latent((2, 16, 3, 2, 3))
    got, want = ours(latent), ref(latent)
    assert got.shape == (2, 3, 17, 64, 96)
    torch.testing.assert_close(got, want, **TOL)
    assert want.abs().max() > 0.1  # the comparison is not between near-zero outputs


def test_timestep_conditioned_decoder_matches_reference():
    """The conditioned path: decode noise from the same generator, default and explicit decode timesteps."""
    ours, ref = video_vae_pair({**TINY_VAE, "timestep_conditioning": True}, "decoder", seed=3)
    latent = _latent((2, 16, 2, 2, 2))
    got = ours(latent, generator=torch.Generator().manual_seed(5))
    want = ref(latent, generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(got, want, **TOL)
    timestep = torch.tensor([0.02, 0.4])
    got = ours(latent, generator=torch.Generator().manual_seed(6), timestep=timestep)
    want = ref(latent, timestep=timestep, generator=torch.Generator().manual_seed(6))
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_encoder_matches_reference(version):
    ours, ref = video_vae_pair(TINY_VAES[version], "encoder", seed=2)
    video = torch.rand((2, 3, 17, 64, 96), generator=torch.Generator().manual_seed(4)) * 2 - 1
    got, want = ours(video), ref(video)
    assert got.shape == (2, 16, 3, 2, 3)
    torch.testing.assert_close(got, want, **TOL)
