"""The audio decoder and the vocoder of a single-file LTX-2 checkpoint (spec §4, §8), checked before loading.

File layout: `audio_vae.decoder.*` + `audio_vae.per_channel_statistics.{mean,std}-of-means` (decoder) and `vocoder.*`
(LTX-2.0: the HiFi-GAN's own names; LTX-2.3: `vocoder.vocoder.*`, `vocoder.bwe_generator.*`, `vocoder.mel_stft.*`,
from which exactly one `vocoder.` is stripped). Configs come from the `audio_vae` and `vocoder` metadata sections.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from ltx2_core.errors import ConfigError, MissingConfigError
from ltx2_core.loader.checkpoint import config_metadata
from ltx2_core.loader.components import load_module, prefixed_keys, statistics_keys
from ltx2_core.loader.safetensors_file import SafetensorsFile, read_header
from ltx2_core.model.audio_vae import AudioDecoder, AudioDecoderConfig, Vocoder, VocoderConfig, build_vocoder

AUDIO_DECODER_PREFIX = "audio_vae.decoder."
AUDIO_STATISTICS_PREFIX = "audio_vae.per_channel_statistics."
VOCODER_PREFIX = "vocoder."
_Config = TypeVar("_Config")


def _section_config(file: SafetensorsFile, section: str, parse: Callable[[Any], _Config]) -> _Config:
    """Parses one metadata section; errors name the file (and, when absent, what the file probably is)."""
    value = config_metadata(file).get(section)
    if value is None:
        raise MissingConfigError(
            f"{file.path}: the 'config' metadata has no '{section}' section, so this file holds no audio "
            f"{'VAE' if section == 'audio_vae' else 'vocoder'}; use a full LTX-2 checkpoint (e.g. "
            "ltx-2-19b-dev.safetensors or ltx-2.3-22b-dev.safetensors), not a transformer-only or LoRA file"
        )
    try:
        return parse(value)
    except ConfigError as exc:
        raise type(exc)(f"{file.path}: {exc}") from exc


def audio_decoder_config(file: SafetensorsFile) -> AudioDecoderConfig:
    return _section_config(file, "audio_vae", AudioDecoderConfig.from_metadata)


def vocoder_config(file: SafetensorsFile) -> VocoderConfig:
    return _section_config(file, "vocoder", VocoderConfig.from_metadata)


def load_audio_decoder(
    path: str | os.PathLike,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
) -> AudioDecoder:
    """The checkpoint's audio VAE decoder with its latent statistics; `dtype` casts floating tensors while loading."""
    file = read_header(path)
    config = audio_decoder_config(file)
    with torch.device("meta"):
        model = AudioDecoder(config)
    keys = prefixed_keys(file, {AUDIO_DECODER_PREFIX: ""}) | statistics_keys(file, AUDIO_STATISTICS_PREFIX)
    return load_module(file, model, keys, "audio decoder", device=device, dtype=dtype)


def load_vocoder(
    path: str | os.PathLike,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
) -> Vocoder:
    """The checkpoint's vocoder: HiFi-GAN (LTX-2.0, 24 kHz) or BigVGAN-v2 + bandwidth extension (LTX-2.3, 48 kHz)."""
    file = read_header(path)
    config = vocoder_config(file)
    with torch.device("meta"):
        model = build_vocoder(config)
    keys = prefixed_keys(file, {VOCODER_PREFIX: ""})  # strips one `vocoder.`: 2.3's `vocoder.vocoder.x` -> `vocoder.x`
    return load_module(file, model, keys, "vocoder", device=device, dtype=dtype)
