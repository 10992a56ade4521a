"""The audio decoder and the vocoder of a single-file LTX-2 checkpoint (spec §4, §8), checked before loading.

File layout: `audio_vae.decoder.*` + `audio_vae.per_channel_statistics.{mean,std}-of-means` (decoder) and `vocoder.*`
(LTX-2.0: the HiFi-GAN's own names; LTX-2.3: `vocoder.vocoder.*`, `vocoder.bwe_generator.*`, `vocoder.mel_stft.*`,
from which exactly one `vocoder.` is stripped). Configs come from the `audio_vae` and `vocoder` metadata sections.
"""

from __future__ import annotations

import os

import torch

from ltx2_core.loader.components import load_bundled
from ltx2_core.model.audio_vae import AudioDecoder, AudioDecoderConfig, Vocoder, VocoderConfig, build_vocoder

AUDIO_DECODER_PREFIX = "audio_vae.decoder."
AUDIO_STATISTICS_PREFIX = "audio_vae.per_channel_statistics."
VOCODER_PREFIX = "vocoder."


def load_audio_decoder(
    path: str | os.PathLike, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
) -> AudioDecoder:
    """The checkpoint's audio VAE decoder with its latent statistics; `dtype` casts floating tensors while loading."""
    return load_bundled(path, "audio_vae", AudioDecoderConfig.from_metadata, AudioDecoder,
                        {AUDIO_DECODER_PREFIX: ""}, "audio decoder", statistics_prefix=AUDIO_STATISTICS_PREFIX,
                        device=device, dtype=dtype)


def load_vocoder(
    path: str | os.PathLike, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
) -> Vocoder:
    """The checkpoint's vocoder: HiFi-GAN (LTX-2.0, 24 kHz) or BigVGAN-v2 + bandwidth extension (LTX-2.3, 48 kHz).

    Exactly one `vocoder.` is stripped: 2.3's `vocoder.vocoder.x` -> `vocoder.x`.
    """
    return load_bundled(path, "vocoder", VocoderConfig.from_metadata, build_vocoder, {VOCODER_PREFIX: ""},
                        "vocoder", device=device, dtype=dtype)
