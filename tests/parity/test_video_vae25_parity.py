"""The LTX-2.5 video decoders, audio decoder, vocoder and upsampler against ltx-core 1.2.0: tiny files in the
released layouts, each side loading them with its own loader, fp32, same seeded decode noise.

The diffusion decoder is checked with both neighborhood-attention paths: comfy-kitchen's `na3d` when installed
and our eager one (1.2.0 runs its vendored copy of comfy-kitchen's eager kernel; natten is not installed)."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.errors import ConfigError, MissingConfigError
from ltx2_core.loader import load_upsampler
from ltx2_core.loader.audio_weights import load_audio_decoder, load_vocoder
from ltx2_core.loader.safetensors_file import read_header
from ltx2_core.loader.vae_weights import (
    CONVOLUTIONAL,
    DIFFUSION,
    load_video_decoder,
    load_video_encoder,
    video_vae_kind,
)
from ltx2_core.model.audio_vae import decode_audio
from ltx2_core.model.video_vae import VideoDecoder, neighborhood_attention
from ltx2_core.model.video_vae.diffusion_config import DiffusionDecoderConfig
from ltx2_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder
from ltx2_core.model.video_vae.tiling import TilingConfig, decode_video
from support.audio25 import write_audio_vae25
from support.model_files import write_upsampler
from support.reference120 import run_reference
from support.video_vae25 import write_conv_vae25, write_diffusion_vae

TOLERANCE = {"rtol": 0, "atol": 1e-5}
SEED = 7
TILING = (64, 32)  # px: 8 stage-4 cells per tile, 4 of overlap (the tiny decoder's minimum overlap is 32 px)
# (F', H', W'): below the latent floor in every axis (padded), above it, and wide enough for 3×3 spatial tiles
LATENTS = {"small": (1, 2, 3), "mid": (3, 3, 4), "wide": (2, 6, 5)}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("ltx25")
    return {"diffusion": write_diffusion_vae(root / "ltx-2.5-video-vae-diffusion.safetensors", prefix="vae."),
            "diffusion_bare": write_diffusion_vae(root / "bare.safetensors"),
            "conv": write_conv_vae25(root / "ltx-2.5-video-vae-conv.safetensors"),
            "audio": write_audio_vae25(root / "ltx-2.5-audio-vae.safetensors"),
            "upsampler": write_upsampler(root / "upsampler.safetensors", "2.3")}


@pytest.fixture(scope="module")
def inputs():
    generator = torch.Generator().manual_seed(5)
    tensors = {name: torch.randn(1, 16, *size, generator=generator) for name, size in LATENTS.items()}
    tensors["conv_latent"] = torch.randn(1, 16, 2, 3, 4, generator=generator)
    tensors["video"] = torch.rand(1, 3, 9, 64, 96, generator=generator) * 2 - 1
    tensors["audio_latent"] = torch.randn(1, 8, 3, 16, generator=generator)
    tensors["video_latent"] = torch.randn(1, 128, 2, 3, 4, generator=generator)
    return tensors


@pytest.fixture(scope="module")
def reference(files, inputs, tmp_path_factory):
    work = tmp_path_factory.mktemp("ref120")
    video = run_reference("video_vae25.py", inputs, {
        "diffusion": str(files["diffusion"]), "conv": str(files["conv"]), "seed": SEED,
        "diffusion_latents": ["small", "mid"], "tiling": list(TILING), "tiled_latent": "wide"}, work)
    audio = run_reference("audio_upsampler25.py", inputs, {"audio": str(files["audio"]),
                                                           "upsampler": str(files["upsampler"])}, work)
    return video | audio


@pytest.fixture(params=["kitchen", "eager"])
def attention(request, monkeypatch):
    """Which na3d our decoder runs: comfy-kitchen's (skipped when not installed) or the eager one."""
    if request.param == "kitchen" and not neighborhood_attention.kitchen_available():
        pytest.skip("comfy-kitchen with na3d (>= 0.2.40) is not installed")
    if request.param == "eager":
        monkeypatch.setattr(neighborhood_attention, "_kitchen_na3d", None)
    return request.param


@pytest.mark.parametrize("name", ["small", "mid"])
def test_diffusion_decoder_matches_reference(files, inputs, reference, attention, name):
    decoder = load_video_decoder(files["diffusion"])
    video = decoder(inputs[name], torch.Generator().manual_seed(SEED))
    expected = reference[f"diffusion.{name}"]
    frames, height, width = LATENTS[name]
    assert video.shape == expected.shape == (1, 3, 8 * (frames - 1) + 1, 32 * height, 32 * width)
    assert expected.std() > 0.1
    torch.testing.assert_close(video, expected, **TOLERANCE)


def test_tiled_diffusion_decode_matches_reference(files, inputs, reference, attention):
    decoder = load_video_decoder(files["diffusion"])
    tiling = TilingConfig(spatial_tile=TILING[0], spatial_overlap=TILING[1], temporal_tile=16, temporal_overlap=8)
    video = decode_video(inputs["wide"], decoder, tiling, generator=torch.Generator().manual_seed(SEED))
    torch.testing.assert_close(video, reference["tiled"], **TOLERANCE)
    whole = decoder(inputs["wide"], torch.Generator().manual_seed(SEED))
    assert (whole - video).abs().max() > 1e-3  # the tiles were decoded in isolation, not the whole video


def test_given_noise_equals_the_generator_draw(files, inputs):
    decoder = load_video_decoder(files["diffusion"])
    latent = inputs["small"]
    noise = torch.randn(decoder.noise_shape(tuple(latent.shape)), generator=torch.Generator().manual_seed(SEED))
    expected = decoder(latent, torch.Generator().manual_seed(SEED))
    torch.testing.assert_close(decoder(latent, noise=noise), expected, rtol=0, atol=0)  # the same noise tensor
    with pytest.raises(ValueError, match="noise_shape"):
        decoder(latent, noise=noise[:, :, :1])


def test_conv_decoder_matches_reference(files, inputs, reference):
    decoder = load_video_decoder(files["conv"])
    assert isinstance(decoder, VideoDecoder) and decoder.config.decoder_channels == 4 * 8  # multipliers 2·2·1
    torch.testing.assert_close(decoder(inputs["conv_latent"]), reference["conv"], **TOLERANCE)


def test_conv_encoder_matches_reference(files, inputs, reference):
    encoder = load_video_encoder(files["conv"])
    assert reference["encoded"].shape == (1, 16, 2, 2, 3)
    torch.testing.assert_close(encoder(inputs["video"]), reference["encoded"], **TOLERANCE)


def test_the_diffusion_vae_files_encoder_matches_reference(files, inputs, reference):
    """The diffusion VAE file's own encoder (its config nested under `vae.encoder`): image conditioning with the
    release's default VAE file."""
    encoder = load_video_encoder(files["diffusion"])
    torch.testing.assert_close(encoder(inputs["video"]), reference["diffusion_encoded"], **TOLERANCE)
    bare = load_video_encoder(files["diffusion_bare"])
    torch.testing.assert_close(bare(inputs["video"]), reference["diffusion_encoded"], **TOLERANCE)


def test_audio_decoder_and_vocoder_match_reference(files, inputs, reference):
    decoder, vocoder = load_audio_decoder(files["audio"]), load_vocoder(files["audio"])
    torch.testing.assert_close(decoder(inputs["audio_latent"]), reference["mel"], **TOLERANCE)
    waveform, rate = decode_audio(inputs["audio_latent"], decoder, vocoder)
    assert rate == int(reference["rate"]) == 48000 and reference["waveform"].abs().mean() > 0.02
    torch.testing.assert_close(waveform, reference["waveform"], **TOLERANCE)


def test_upsampler_matches_reference(files, inputs, reference):
    upsampler = load_upsampler(files["upsampler"])
    torch.testing.assert_close(upsampler(inputs["video_latent"]), reference["upsampled"], **TOLERANCE)


def test_files_say_which_decoder_they_hold(files, inputs):
    assert video_vae_kind(read_header(files["diffusion"])) == (DIFFUSION, "CausalDiffusionVAE", "2.5.0")
    assert video_vae_kind(read_header(files["conv"])) == (CONVOLUTIONAL, "CausalVideoAutoencoder", "2.5.0")
    bare, prefixed = load_video_decoder(files["diffusion_bare"]), load_video_decoder(files["diffusion"])
    assert isinstance(bare, DiffusionVideoDecoder)
    for (name, a), b in zip(bare.state_dict().items(), prefixed.state_dict().values()):
        assert torch.equal(a, b), name  # the same tensors under two prefixes, loaded the same way
    with pytest.raises(MissingConfigError, match="no 'vae' section"):
        load_video_decoder(files["audio"])
    with pytest.raises(ConfigError, match="describes the convolutional decoder"):
        DiffusionDecoderConfig.from_metadata({"_class_name": "CausalVideoAutoencoder"})
