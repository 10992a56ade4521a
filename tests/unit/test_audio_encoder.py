"""The audio encoder's input checks, config checks and loader errors (the parity lives in
tests/parity/test_audio_encoder_parity.py): bad input is refused before any model work, with the fix."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from safetensors.torch import save_file
from support.audio25 import audio_vae_tensors
from support.configs import TINY_AUDIO_VAE

from ltx2_core.errors import ConfigError, KeyMismatchError
from ltx2_core.loader import load_audio_encoder
from ltx2_core.model.audio_vae import AudioEncoder, AudioEncoderConfig, encode_audio
from ltx2_core.model.audio_vae.mel import resample

CONFIG = AudioEncoderConfig.from_metadata(TINY_AUDIO_VAE)


@pytest.fixture(scope="module")
def encoder():
    return AudioEncoder(CONFIG).eval()


@pytest.mark.parametrize(("shape", "words"), [((1, 3, 800), "downmix"), ((1, 6, 800), "downmix"),
                                              ((800,), "(B, C, samples)"), ((1, 2, 0), "empty"),
                                              ((0, 2, 800), "empty")])
def test_bad_layouts_are_refused(encoder, shape, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        encode_audio(torch.zeros(shape), 16000, encoder)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_samples_are_refused(encoder, bad):
    waveform = torch.zeros(1, 2, 800)
    waveform[0, 1, 17] = bad
    with pytest.raises(ValueError, match="NaN or infinite"):
        encode_audio(waveform, 16000, encoder)


@pytest.mark.parametrize("rate", [0, -16000, 44100.0, True])
def test_bad_sample_rates_are_refused(encoder, rate):
    with pytest.raises(ValueError, match="sample_rate"):
        encode_audio(torch.zeros(1, 2, 800), rate, encoder)


def test_integer_samples_are_refused(encoder):
    with pytest.raises(ValueError, match="floating point"):
        encode_audio(torch.zeros(1, 2, 800, dtype=torch.int16), 16000, encoder)


def test_mono_is_encoded_as_both_sides(encoder):
    mono = torch.randn(1, 1, 1600, generator=torch.Generator().manual_seed(0)) * 0.1
    with torch.no_grad():
        torch.testing.assert_close(encode_audio(mono[0], 16000, encoder), encode_audio(mono.repeat(1, 2, 1), 16000,
                                                                                         encoder), rtol=0, atol=0)


def test_mel_of_wrong_shape_is_refused(encoder):
    with pytest.raises(ValueError, match=r"\(B, 2, T, 64\)"):
        encoder(torch.zeros(1, 2, 10, 32))


def test_resample_length_is_the_references():
    # ceil(S · new / orig) samples, as torchaudio's resample
    assert resample(torch.zeros(2, 442), 44100, 16000).shape == (2, 161)
    assert resample(torch.zeros(1, 1, 100), 8000, 16000).shape == (1, 1, 200)


@pytest.mark.parametrize(("key", "value"), [("in_channels", 1), ("double_z", False)])
def test_encoder_config_outside_the_released_layout_is_refused(key, value):
    section = copy.deepcopy(TINY_AUDIO_VAE)
    section["model"]["params"]["ddconfig"][key] = value
    with pytest.raises(ConfigError, match=f"ddconfig.{key}"):
        AudioEncoderConfig.from_metadata(section)


def test_file_without_encoder_names_the_fix(tmp_path):
    tensors = {k: v for k, v in audio_vae_tensors(TINY_AUDIO_VAE, seed=0).items() if ".encoder." not in k}
    path = tmp_path / "decoder_only.safetensors"
    save_file(tensors, str(path), metadata={"config": json.dumps({"audio_vae": TINY_AUDIO_VAE})})
    with pytest.raises(KeyMismatchError, match="audio encoder"):
        load_audio_encoder(path)


def test_loads_with_statistics(tmp_path):
    tensors = audio_vae_tensors(TINY_AUDIO_VAE, seed=0)
    path = tmp_path / "audio_vae.safetensors"
    save_file(tensors, str(path), metadata={"config": json.dumps({"audio_vae": TINY_AUDIO_VAE})})
    encoder = load_audio_encoder(path, dtype=torch.float32)
    stats = encoder.per_channel_statistics.get_buffer("std-of-means")
    torch.testing.assert_close(stats, tensors["audio_vae.per_channel_statistics.std-of-means"], rtol=0, atol=0)
