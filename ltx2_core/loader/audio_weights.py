"""The audio decoder, the audio encoder and the vocoder (spec §4, §8), from their sources, checked before loading.

Inside its component the audio decoder is `decoder.*` (the encoder `encoder.*`) + `per_channel_statistics.{mean,std}-of-means` (bundled under
`audio_vae.`); the vocoder is everything under its prefix (bundled: `vocoder.`; LTX-2.0: the HiFi-GAN's own names;
LTX-2.3: `vocoder.*`, `bwe_generator.*`, `mel_stft.*`, so 2.3's `vocoder.vocoder.x` loads as `vocoder.x`). Configs
come from the `audio_vae` and `vocoder` metadata sections.
"""

from __future__ import annotations

import torch

from ltx2_core.loader.components import load_component
from ltx2_core.loader.sources import Component, PathLike, Source, component_source
from ltx2_core.model.audio_vae import (
    AudioDecoder,
    AudioDecoderConfig,
    AudioEncoder,
    AudioEncoderConfig,
    Vocoder,
    VocoderConfig,
    build_vocoder,
)

AUDIO_DECODER = "decoder."
AUDIO_ENCODER = "encoder."
AUDIO_STATISTICS = "per_channel_statistics."


def load_audio_decoder(
    source: PathLike | Source, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
) -> AudioDecoder:
    """The audio VAE decoder with its latent statistics; `dtype` casts floating tensors while loading. `source`: a
    `Source` or the bundled checkpoint's path."""
    return load_component(component_source(source, Component.AUDIO_DECODER), Component.AUDIO_DECODER,
                          AudioDecoderConfig.from_metadata, AudioDecoder, {AUDIO_DECODER: ""},
                          statistics=AUDIO_STATISTICS, device=device, dtype=dtype)


def load_audio_encoder(
    source: PathLike | Source, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
) -> AudioEncoder:
    """The audio VAE encoder (`encoder.*`) with the latent statistics it normalises by; config, keys and shapes are
    checked before loading. `source`: a `Source` or the bundled checkpoint's (or LTX-2.5 audio VAE file's) path."""
    source = component_source(source, Component.AUDIO_ENCODER)
    return load_component(source, Component.AUDIO_ENCODER,
                          AudioEncoderConfig.from_metadata, AudioEncoder, {AUDIO_ENCODER: ""},
                          statistics=AUDIO_STATISTICS, device=device, dtype=dtype)


def load_vocoder(
    source: PathLike | Source, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
) -> Vocoder:
    """The vocoder: HiFi-GAN (LTX-2.0, 24 kHz) or BigVGAN-v2 + bandwidth extension (LTX-2.3, 48 kHz). `source`: a
    `Source` or the bundled checkpoint's path."""
    return load_component(component_source(source, Component.VOCODER), Component.VOCODER,
                          VocoderConfig.from_metadata, build_vocoder, {"": ""}, device=device, dtype=dtype)
