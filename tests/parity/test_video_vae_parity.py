"""Our video VAE vs the reference `ltx_core` VideoDecoder / VideoEncoder: tiny configs, same random weights, fp32.

Tolerance atol=rtol=1e-5: the same fp32 convolutions run on both sides; what differs is the pixel norm (a vector
norm instead of mean(x²), rsqrt instead of division) and elementwise association, measured ≤ 4e-6 on outputs of
magnitude ~3 (weights N(0, 1/fan-in), so activations stay O(1) through every stage).
"""

from __future__ import annotations

import pytest
import torch

from ltx2_core.model.transformer.config import ModelVersion
from ltx2_core.loader.vae_weights import load_video_decoder, load_video_encoder
from support.checkpoints import other_components
from support.configs import CHECKPOINT_VAES, TINY_VAE, TINY_VAES
from support.reference import import_ltx_core
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


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_loading_from_the_checkpoint_matches_the_reference(version, tiny_checkpoints):
    """The bundle's `vae.*` tensors (written from ltx_core modules, plus statistics the model does not use)."""
    import_ltx_core()
    from ltx_core.model.video_vae import VideoDecoderConfigurator, VideoEncoderConfigurator

    path = tiny_checkpoints[version]
    decoder, encoder = load_video_decoder(path), load_video_encoder(path)
    tensors = other_components(ModelVersion(version))
    stats = {f"per_channel_statistics.{s}": tensors[f"vae.per_channel_statistics.{s}"]
             for s in ("mean-of-means", "std-of-means")}
    for ours, configurator, part in ((decoder, VideoDecoderConfigurator, "decoder"),
                                     (encoder, VideoEncoderConfigurator, "encoder")):
        ref = configurator.from_config({"vae": CHECKPOINT_VAES[version]})
        prefix = f"vae.{part}."
        ref.load_state_dict({k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)} | stats)
        for name, value in ref.state_dict().items():
            assert torch.equal(ours.state_dict()[name], value), name  # both loaded copies of the file's tensors
    latent = torch.randn(1, 128, 2, 2, 3)
    assert decoder(latent).shape == (1, 3, 9, 64, 96)
    assert encoder(torch.rand(1, 3, 9, 64, 32) * 2 - 1).shape == (1, 128, 2, 2, 1)
