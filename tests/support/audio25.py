"""A tiny LTX-2.5 audio VAE file: 1.2.0 reads the audio decoder and the BigVGAN + bandwidth-extension vocoder of
2.5 exactly as those of 2.3 (same `config.audio_vae` / `config.vocoder` sections, same `audio_vae.decoder.`,
`audio_vae.per_channel_statistics.`, `vocoder.` keys), so the file is 2.3's layout with 2.5's `model_version`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from safetensors.torch import save_file

from ltx2_core.model.audio_vae import (
    AudioDecoder,
    AudioDecoderConfig,
    AudioEncoder,
    AudioEncoderConfig,
    VocoderConfig,
    build_vocoder,
)
from support.configs import TINY_AUDIO_VAE, TINY_VOCODERS

AUDIO_VAE25 = TINY_AUDIO_VAE
VOCODER25 = TINY_VOCODERS["2.3"]


def _dft_bases(n_fft: int) -> torch.Tensor:
    """Hann-windowed DFT rows (real, then imaginary): the BWE's spectrum is a real one."""
    angle = 2 * math.pi * torch.arange(n_fft // 2 + 1)[:, None] * torch.arange(n_fft)[None] / n_fft
    window = torch.hann_window(n_fft)
    return torch.cat([torch.cos(angle) * window, -torch.sin(angle) * window])[:, None]


def random_audio_state(module: torch.nn.Module, seed: int, gain: float) -> dict[str, torch.Tensor]:
    """Weights gain/sqrt(fan-in), small biases, SnakeBeta parameters and statistics around their working values, mel
    filters with a few empty ones (their log-mel at the floor: the clamp value is exercised too); anti-alias filters
    kept. `gain`: high enough that the early layers are not drowned by the late biases (a 10 % change of a
    leaky-ReLU slope must show), low enough that SnakeBeta's DC and the tanh/clamp do not saturate; a transposed
    convolution's output sample sees about in·k/2 of its (in, out, k) weights."""
    generator = torch.Generator().manual_seed(seed)
    randn = lambda shape: torch.randn(shape, generator=generator)  # noqa: E731
    state = {}
    for name, value in module.state_dict().items():
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "weight":
            fan_in = value.shape[0] * value.shape[2] / 2 if ".ups." in f".{name}" else value[0].numel()
            state[name] = randn(value.shape) * gain / math.sqrt(fan_in)
        elif leaf in ("bias", "alpha", "beta", "mean-of-means"):
            state[name] = randn(value.shape) * (0.02 if leaf == "bias" else 0.5)
        elif leaf == "std-of-means":
            state[name] = 0.5 + torch.rand(value.shape, generator=generator)
        elif leaf == "mel_basis":
            state[name] = torch.rand(value.shape, generator=generator) * 0.05
            state[name][-4:] = 0
        elif leaf in ("forward_basis", "inverse_basis"):
            state[name] = _dft_bases(value.shape[-1])
        else:
            state[name] = value.clone()
    return state


def audio_vae_tensors(section: dict, seed: int) -> dict[str, torch.Tensor]:
    """Both halves of an audio VAE under their bundled keys: `audio_vae.decoder.*`, `audio_vae.encoder.*` and the
    shared `audio_vae.per_channel_statistics.*` (the decoder's draw)."""
    decoder = AudioDecoder(AudioDecoderConfig.from_metadata(section))
    encoder = AudioEncoder(AudioEncoderConfig.from_metadata(section))
    tensors = {}
    for half, state in (("encoder", random_audio_state(encoder, seed + 2, 1.0)),
                        ("decoder", random_audio_state(decoder, seed, 1.0))):
        for key, value in state.items():
            name = key.split(".", 1)[1] if key.startswith("per_channel_statistics.") else None
            tensors["audio_vae.per_channel_statistics." + name if name else f"audio_vae.{half}." + key] = value
    return tensors


def write_audio_vae25(path: Path, seed: int = 0) -> Path:
    """Audio VAE (decoder and encoder) + vocoder of 2.5 at toy size, under their bundled prefixes, with the `config`
    metadata."""
    vocoder = build_vocoder(VocoderConfig.from_metadata(VOCODER25))
    tensors = audio_vae_tensors(AUDIO_VAE25, seed)
    tensors |= {"vocoder." + k: v for k, v in random_audio_state(vocoder, seed + 1, 0.7).items()}
    metadata = {"config": json.dumps({"audio_vae": AUDIO_VAE25, "vocoder": VOCODER25}), "model_version": "2.5.0"}
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)
    return path
