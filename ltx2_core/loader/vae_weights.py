"""Loading the video VAE decoder / encoder from their source: by default the bundled checkpoint's `vae.*` (spec §8).

Inside the component the halves are `decoder.*` and `encoder.*` next to the latent `per_channel_statistics.*`.
LTX-2.5 ships its VAEs as files of their own, one per decoder kind (`video_vae_kind`): the convolutional one
(`_class_name` "CausalVideoAutoencoder", as in 2.0 / 2.3) and the diffusion one ("CausalDiffusionVAE"), with
their tensors either under `vae.` or bare; a path is read with whichever prefix its tensors carry. A convolutional
VAE file without `config` metadata (cut out of a 2.0 / 2.3 bundle without it) takes the released section whose
shapes it has (`released_vae_section`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import torch

from ltx2_core.errors import ConfigError, MissingConfigError
from ltx2_core.loader.checkpoint import config_metadata
from ltx2_core.loader.components import FULL_CHECKPOINT_HINT, load_component
from ltx2_core.loader.diffusion_vae_weights import load_diffusion_decoder
from ltx2_core.loader.safetensors_file import SafetensorsFile, read_header
from ltx2_core.loader.sources import BUNDLE, Component, PathLike, Source
from ltx2_core.model.video_vae import VideoDecoder, VideoEncoder, VideoVaeConfig
from ltx2_core.model.video_vae.diffusion_config import CONV_VAE_CLASS, is_diffusion_vae
from ltx2_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder
from ltx2_core.model.video_vae.released import RELEASED_VAE_SECTIONS

DECODER, ENCODER, STATISTICS = "decoder.", "encoder.", "per_channel_statistics."
CONVOLUTIONAL, DIFFUSION = "convolutional", "diffusion"


class VideoVaeKind(NamedTuple):
    """What a file's `vae` section describes: `decoder` CONVOLUTIONAL or DIFFUSION, its `_class_name`, and the
    file's `model_version` metadata when it has one (the diffusion decoder exists only in LTX-2.5)."""

    decoder: str
    class_name: str
    version: str | None


def video_vae_kind(file: SafetensorsFile) -> VideoVaeKind:
    """The kind of video VAE in `file` from its header; MissingConfigError when it holds none."""
    section = config_metadata(file).get("vae") if "config" in file.metadata else released_vae_section(file)
    if not isinstance(section, dict):
        raise MissingConfigError(f"{file.path}: the 'config' metadata has no 'vae' section, so this file holds no "
                                 f"video VAE; {FULL_CHECKPOINT_HINT} (or an LTX-2.5 video VAE file)")
    version = file.metadata.get("model_version")
    if is_diffusion_vae(section):
        return VideoVaeKind(DIFFUSION, str(section["_class_name"]), version or "2.5")
    return VideoVaeKind(CONVOLUTIONAL, str(section.get("_class_name", CONV_VAE_CLASS)), version)


def load_video_decoder(
    source: PathLike | Source, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
) -> VideoDecoder | DiffusionVideoDecoder:
    """The video VAE decoder with its latent statistics, convolutional or diffusion as the file's `vae` section
    says (`video_vae_kind`); config, keys and shapes checked first. `source`: a `Source` or a file's path (a
    bundled checkpoint or an LTX-2.5 VAE file)."""
    source = _vae_source(source, Component.VIDEO_DECODER)
    file = read_header(source.path)
    if video_vae_kind(file).decoder == DIFFUSION:
        return load_diffusion_decoder(file, source, device=device, dtype=dtype)
    return load_component(source, Component.VIDEO_DECODER, VideoVaeConfig.from_metadata, VideoDecoder,
                          {DECODER: ""}, statistics=STATISTICS, device=device, dtype=dtype,
                          fallback=released_vae_section)


def load_video_encoder(
    source: PathLike | Source, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
) -> VideoEncoder:
    """The video VAE encoder with its latent statistics; config, keys and shapes checked first. `source`: a
    `Source` or the bundled checkpoint's path. Both LTX-2.5 video VAE files carry the same convolutional encoder (the
    diffusion one's config nested under `vae.encoder`)."""
    source = _vae_source(source, Component.VIDEO_ENCODER)
    return load_component(source, Component.VIDEO_ENCODER, VideoVaeConfig.encoder_from_metadata, VideoEncoder,
                          {ENCODER: ""}, statistics=STATISTICS, device=device, dtype=dtype,
                          fallback=released_vae_section)


def released_vae_section(file: SafetensorsFile) -> Mapping[str, Any] | None:
    """The released `vae` section (2.0's or 2.3's, `RELEASED_VAE_SECTIONS`) whose decoder and encoder have exactly
    the shapes of the halves `file` holds (under `vae.` or bare), for a file without `config` metadata; None when
    none fits (headers only: the models are built on meta)."""
    prefix = BUNDLE[Component.VIDEO_DECODER] if any(n.startswith(BUNDLE[Component.VIDEO_DECODER])
                                                    for n in file.tensors) else ""
    halves = {half: {n[len(prefix + half):]: tuple(e.shape) for n, e in file.tensors.items()
                     if n.startswith(prefix + half)} for half in (DECODER, ENCODER)}
    if not any(halves.values()):
        return None
    for section in RELEASED_VAE_SECTIONS.values():
        config = VideoVaeConfig.from_metadata(section)
        with torch.device("meta"):
            built = {DECODER: VideoDecoder(config), ENCODER: VideoEncoder(config)}
        shapes = {half: {k: tuple(v.shape) for k, v in model.state_dict().items() if not k.startswith(STATISTICS)}
                  for half, model in built.items()}
        if all(not found or found == shapes[half] for half, found in halves.items()):
            return dict(section)
    return None


def released_vae_release(file: SafetensorsFile) -> str | None:
    """The release ("2.0", "2.3") whose released convolutional VAE the file's `vae` section has the form of: the
    decoder's resampling blocks (kind, channel divisor, residual) in order and its padding, widths and layer counts
    aside (a tiny VAE of a release's form counts as that release); without `config` metadata, the release whose
    shapes it has (`released_vae_section`). None for a diffusion VAE, a form of no listed release (LTX-2.5's
    convolutional VAE, which only its `model_version` names) and a section that does not parse. Headers only."""
    if "config" not in file.metadata:
        section = released_vae_section(file)
        return next((release for release, known in RELEASED_VAE_SECTIONS.items() if known == section), None)
    section = config_metadata(file).get("vae")
    if not isinstance(section, dict) or is_diffusion_vae(section):
        return None
    try:
        form = _decoder_form(VideoVaeConfig.from_metadata(section))
    except ConfigError:
        return None
    return next((release for release, known in RELEASED_VAE_SECTIONS.items()
                 if _decoder_form(VideoVaeConfig.from_metadata(known)) == form), None)


def _decoder_form(config: VideoVaeConfig) -> tuple:
    resampling = tuple((block.kind, block.multiplier, block.residual) for block in config.decoder_blocks
                       if block.kind != "res_x")
    return resampling, config.decoder_padding


def _vae_source(source: PathLike | Source, component: Component) -> Source:
    """A `Source` as given; for a path, the bundle's `vae.` prefix unless the file's VAE tensors are bare
    (`decoder.*`, `encoder.*`, as in a VAE file of its own)."""
    if isinstance(source, Source):
        return source
    tensors = read_header(Path(source)).tensors
    prefix = BUNDLE[component]
    if not any(name.startswith(prefix) for name in tensors) and any(
            name.startswith((DECODER, ENCODER)) for name in tensors):
        prefix = ""
    return Source(Path(source), prefix)
