"""Loading the video VAE decoder / encoder from their source: by default the bundled checkpoint's `vae.*` (spec §8).

Inside the component the halves are `decoder.*` and `encoder.*` next to the latent `per_channel_statistics.*`.
"""

from __future__ import annotations

import torch

from ltx2_core.loader.components import load_component
from ltx2_core.loader.sources import Component, PathLike, Source, component_source
from ltx2_core.model.video_vae import VideoDecoder, VideoEncoder, VideoVaeConfig

DECODER, ENCODER, STATISTICS = "decoder.", "encoder.", "per_channel_statistics."


def load_video_decoder(
    source: PathLike | Source, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
) -> VideoDecoder:
    """The video VAE decoder with its latent statistics; config, keys and shapes checked first. `source`: a
    `Source` or the bundled checkpoint's path."""
    return load_component(component_source(source, Component.VIDEO_DECODER), Component.VIDEO_DECODER,
                          VideoVaeConfig.from_metadata, VideoDecoder, {DECODER: ""}, statistics=STATISTICS,
                          device=device, dtype=dtype)


def load_video_encoder(
    source: PathLike | Source, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
) -> VideoEncoder:
    """The video VAE encoder with its latent statistics; config, keys and shapes checked first. `source`: a
    `Source` or the bundled checkpoint's path."""
    return load_component(component_source(source, Component.VIDEO_ENCODER), Component.VIDEO_ENCODER,
                          VideoVaeConfig.from_metadata, VideoEncoder, {ENCODER: ""}, statistics=STATISTICS,
                          device=device, dtype=dtype)
