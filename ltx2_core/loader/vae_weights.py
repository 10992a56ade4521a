"""Loading the video VAE decoder / encoder out of a single-file LTX-2 checkpoint (`vae.*`, spec §8)."""

from __future__ import annotations

import os

import torch

from ltx2_core.errors import ConfigError, MissingConfigError
from ltx2_core.loader.checkpoint import config_metadata
from ltx2_core.loader.components import load_module, prefixed_keys, statistics_keys
from ltx2_core.loader.safetensors_file import SafetensorsFile, read_header
from ltx2_core.model.video_vae import VideoDecoder, VideoEncoder, VideoVaeConfig


def video_vae_config(file: SafetensorsFile) -> VideoVaeConfig:
    """VideoVaeConfig from the `vae` section of the file's `config` metadata; errors name the file."""
    section = config_metadata(file).get("vae")
    if section is None:
        raise MissingConfigError(
            f"{file.path}: the 'config' metadata has no 'vae' section, so this file holds no LTX-2 video VAE; pass "
            "the LTX-2 / LTX-2.3 model checkpoint (e.g. ltx-2.3-22b-dev.safetensors), which bundles it"
        )
    try:
        return VideoVaeConfig.from_metadata(section)
    except ConfigError as exc:
        raise type(exc)(f"{file.path}: {exc}") from exc


def load_video_decoder(
    path: str | os.PathLike, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
) -> VideoDecoder:
    """The checkpoint's video VAE decoder with its latent statistics; config, keys and shapes checked first."""
    return _load(path, VideoDecoder, "decoder", device, dtype)


def load_video_encoder(
    path: str | os.PathLike, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
) -> VideoEncoder:
    """The checkpoint's video VAE encoder with its latent statistics; config, keys and shapes checked first."""
    return _load(path, VideoEncoder, "encoder", device, dtype)


def _load(path, cls, part: str, device, dtype):
    file = read_header(path)
    config = video_vae_config(file)
    with torch.device("meta"):
        model = cls(config)
    keys = prefixed_keys(file, {f"vae.{part}.": ""}) | statistics_keys(file, "vae.per_channel_statistics.")
    return load_module(file, model, keys, f"video VAE {part}", device=device, dtype=dtype)
