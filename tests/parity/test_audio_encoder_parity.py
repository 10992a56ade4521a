"""The audio VAE encoder and its waveform -> log-mel front end against ltx-core 1.2.0, same weights, fp32.

1.2.0 builds the audio VAEs of 2.0 and 2.3 as well as 2.5's (the same `audio_vae` config section and keys), and its
mel front end needs torchaudio, which does not import beside our torch: so 1.2.0 is the reference for all three, run
in the shared ComfyUI's venv (tests/support/reference120.py). Files: the audio VAE part of a 2.0 and of a 2.3 bundle
(`audio_vae.encoder.*`, `audio_vae.per_channel_statistics.*`, the `audio_vae` section, their model_version) and
2.5's audio VAE file (support.audio25). Inputs: stereo at the model's rate, stereo at 44.1 kHz (sinc resampling),
mono at 22.05 kHz; the reference has no mono path (its encoder takes two channels), so our mono encode is compared
with the reference given the mono channel on both sides, which is what we do with mono.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import save_file
from support.audio25 import audio_vae_tensors, write_audio_vae25
from support.configs import TINY_AUDIO_VAE
from support.reference120 import run_reference

from ltx2_core.loader.audio_weights import load_audio_encoder
from ltx2_core.model.audio_vae import encode_audio
from ltx2_core.model.audio_vae.encoder import stereo_waveform
from ltx2_core.model.audio_vae.mel import waveform_to_mel

TOLERANCE = {"atol": 1e-5, "rtol": 0}
MODEL_RATE = TINY_AUDIO_VAE["model"]["params"]["sampling_rate"]
CASES = {"native": (MODEL_RATE, 2), "stereo44k": (44100, 2), "mono22k": (22050, 1)}

pytestmark = pytest.mark.usefixtures("one_thread")


def _waveform(rate: int, channels: int, seconds: float, seed: int) -> torch.Tensor:
    """(1, channels, samples): a few tones (some above the model's Nyquist frequency) and noise, within [-1, 1]."""
    generator = torch.Generator().manual_seed(seed)
    t = torch.arange(int(rate * seconds)) / rate
    tones = sum(0.2 * torch.sin(2 * math.pi * f * t + p) for f, p in ((220.0, 0.0), (1870.0, 1.0), (9500.0, 2.0)))
    noise = 0.05 * torch.randn(channels, t.numel(), generator=generator)
    return (tones[None] + noise)[None].float()


def _bundle(path, version: str):
    metadata = {"config": json.dumps({"audio_vae": TINY_AUDIO_VAE}), "model_version": version}
    save_file({k: v.contiguous() for k, v in audio_vae_tensors(TINY_AUDIO_VAE, seed=40).items()}, str(path),
              metadata=metadata)
    return path


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """Our mel and latent and the reference's, per file and case, from one reference call."""
    tmp = tmp_path_factory.mktemp("audio_encoder")
    files = {"2.0": _bundle(tmp / "ltx2.safetensors", "2.0.0"), "2.3": _bundle(tmp / "ltx23.safetensors", "2.3.0"),
             "2.5": write_audio_vae25(tmp / "audio_vae25.safetensors", seed=3)}
    waveforms = {case: _waveform(rate, channels, 0.43, seed) for seed, (case, (rate, channels)) in
                 enumerate(CASES.items())}
    # the reference is given what we encode: mono on both sides
    sent = {case: stereo_waveform(w).contiguous() for case, w in waveforms.items()}
    settings = {"files": {k: str(v) for k, v in files.items()}, "cases": {k: r for k, (r, _) in CASES.items()}}
    expected = run_reference("audio_encoder.py", sent, settings, tmp)
    results = {}
    for name, path in files.items():
        encoder = load_audio_encoder(path).eval()
        for case, (rate, _) in CASES.items():
            with torch.no_grad():
                mel = waveform_to_mel(sent[case], rate, encoder.config.mel)
                latent = encode_audio(waveforms[case], rate, encoder)
            results[f"{name}.{case}.mel"] = mel
            results[f"{name}.{case}.latent"] = latent
    return results, expected


@pytest.mark.parametrize("version", ["2.0", "2.3", "2.5"])
@pytest.mark.parametrize("case", list(CASES))
def test_mel_and_latent_match_reference(compared, version, case):
    ours, reference = compared
    for part in ("mel", "latent"):
        key = f"{version}.{case}.{part}"
        assert ours[key].shape == reference[key].shape, key
        torch.testing.assert_close(ours[key], reference[key], **TOLERANCE, msg=lambda m, key=key: f"{key}: {m}")
    assert ours[f"{version}.{case}.latent"].shape[1:] == (8, math.ceil(ours[f"{version}.{case}.mel"].shape[2] / 4),
                                                          16)
