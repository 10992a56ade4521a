"""Loading the video VAE decoder / encoder out of a single-file LTX-2 checkpoint (`vae.*`, spec §8)."""

from __future__ import annotations

import os

import torch

from ltx2_core.loader.components import load_bundled
from ltx2_core.model.video_vae import VideoDecoder, VideoEncoder, VideoVaeConfig

STATISTICS_PREFIX = "vae.per_channel_statistics."


def load_video_decoder(
    path: str | os.PathLike, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
) -> VideoDecoder:
    """The checkpoint's video VAE decoder with its latent statistics; config, keys and shapes checked first."""
    return load_bundled(path, "vae", VideoVaeConfig.from_metadata, VideoDecoder, {"vae.decoder.": ""},
                        "video VAE decoder", statistics_prefix=STATISTICS_PREFIX, device=device, dtype=dtype)


def load_video_encoder(
    path: str | os.PathLike, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
) -> VideoEncoder:
    """The checkpoint's video VAE encoder with its latent statistics; config, keys and shapes checked first."""
    return load_bundled(path, "vae", VideoVaeConfig.from_metadata, VideoEncoder, {"vae.encoder.": ""},
                        "video VAE encoder", statistics_prefix=STATISTICS_PREFIX, device=device, dtype=dtype)
