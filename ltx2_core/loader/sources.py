"""Where each component's weights are: one file and a key prefix per component (spec §8).

LTX-2.0 and 2.3 ship one bundled checkpoint: the DiT, the text projection and connectors, the video VAE, the audio
VAE and the vocoder in one file, each under its own prefix (`BUNDLE`), with one `config` metadata entry holding a
section per component (`SECTIONS`). The latent upsampler is always a file of its own. A release that ships its
components as separate files maps them with `Sources.separate` (prefix "" unless the file nests its tensors);
LTX-2.5's released files with `Sources.split` (`SPLIT`: the same prefixes as the bundle, except the text projection
inside the text encoder file and the video VAE, whose tensors may be bare). A transformer of its own that lacks part
of the text path (a GGUF conversion, an LTX-2 / 2.3 transformer-only file) takes it from a text projection file
(ComfyUI's `ltx-2*-embeddings_connector*.safetensors`, or the official checkpoint: the bundle's prefixes, the
connectors also bare): the connectors
where the transformer file holds them, else from that file; the projection from that file when it holds it, else
from the text encoder's (2.5). Every loader reads its `config` section from the file of its own source, so a section
is found in whichever file holds the component (the text path is sized from shapes where none has one).

Every loader takes a `Source` (or, for today's callers, a bare path, which means "this component of a bundle" as
`component_source` says); the names *inside* a component (a VAE's `decoder.` / `encoder.` /
`per_channel_statistics.`, a connector's name) stay with the loader of that component.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from ltx2_core.errors import CheckpointError
from ltx2_core.loader.gguf_reader import is_gguf, read_gguf
from ltx2_core.loader.safetensors_file import read_header


class Component(str, Enum):
    """A separately loaded part of an LTX-2 model; the value names it in messages."""

    TRANSFORMER = "transformer"
    TEXT_PROJECTION = "text projection"  # the feature extractor over the language model's hidden states
    TEXT_CONNECTORS = "text connectors"  # the video and audio embeddings connectors
    VIDEO_DECODER = "video VAE decoder"
    VIDEO_ENCODER = "video VAE encoder"
    AUDIO_DECODER = "audio decoder"
    AUDIO_ENCODER = "audio encoder"
    VOCODER = "vocoder"
    UPSAMPLER = "latent upsampler"
    DURATION_HEAD = "duration head"  # LTX-2.5's clip length from the prompt (`model.duration_head`)


class Source(NamedTuple):
    """One component's file and the prefix its tensors carry there ("" when the file holds only it)."""

    path: Path
    prefix: str = ""

    def key(self, name: str) -> str:
        """The file key of `name` (a key relative to the component)."""
        return self.prefix + name


# The bundled checkpoint's prefix of each component. The connectors share the DiT's prefix in the file (as
# `video_embeddings_connector.*` / `audio_embeddings_connector.*`) but belong to the text path; both VAE halves and
# their latent statistics live under `vae.`.
BUNDLE: Mapping[Component, str] = MappingProxyType({
    Component.TRANSFORMER: "model.diffusion_model.",
    Component.TEXT_PROJECTION: "text_embedding_projection.",
    Component.TEXT_CONNECTORS: "model.diffusion_model.",
    Component.VIDEO_DECODER: "vae.",
    Component.VIDEO_ENCODER: "vae.",
    Component.AUDIO_DECODER: "audio_vae.",
    Component.AUDIO_ENCODER: "audio_vae.",
    Component.VOCODER: "vocoder.",
})
# The section of the `config` metadata that describes each component (the text path is sized by the transformer's).
SECTIONS: Mapping[Component, str] = MappingProxyType({
    Component.TRANSFORMER: "transformer",
    Component.TEXT_PROJECTION: "transformer",
    Component.TEXT_CONNECTORS: "transformer",
    Component.VIDEO_DECODER: "vae",
    Component.VIDEO_ENCODER: "vae",
    Component.AUDIO_DECODER: "audio_vae",
    Component.AUDIO_ENCODER: "audio_vae",
    Component.VOCODER: "vocoder",
})
# LTX-2.5's split layout: file role -> the components it holds and their prefixes (1.2.0's loaders accept exactly
# these): the transformer file holds the DiT and the text connectors (as in the bundle), the text encoder file the
# text projection next to Gemma 4, the audio VAE file the audio VAE and the vocoder. The video VAE's prefix is read
# from its header (`video_vae_prefix`).
SPLIT: Mapping[str, Mapping[Component, str]] = MappingProxyType({
    "transformer": {Component.TRANSFORMER: "model.diffusion_model.",
                    Component.TEXT_CONNECTORS: "model.diffusion_model."},
    "text encoder": {Component.TEXT_PROJECTION: "text_embedding_projection."},
    "audio VAE": {Component.AUDIO_DECODER: "audio_vae.", Component.AUDIO_ENCODER: "audio_vae.",
                  Component.VOCODER: "vocoder."},
})
VIDEO_VAE_PARTS = ("decoder.", "encoder.", "per_channel_statistics.")
# the duration head's prefix, in the transformer's file or in a file of its own alike (1.2.0's DURATION_HEAD_KEY_OPS)
DURATION_HEAD_PREFIX = "duration_head."
# what decoding a generation needs besides the DiT
DECODING = (Component.VIDEO_DECODER, Component.AUDIO_DECODER, Component.VOCODER)

PathLike = str | os.PathLike


@dataclass(frozen=True)
class Sources:
    """Component -> `Source` for one model: a bundle, separate files, or a bundle with some parts elsewhere."""

    parts: Mapping[Component, Source] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", dict(self.parts))  # a copy the caller cannot change (and picklable)

    @classmethod
    def bundled(cls, checkpoint: PathLike) -> Sources:
        """Every bundled component from the single-file `checkpoint`, under its `BUNDLE` prefix."""
        path = Path(checkpoint)
        return cls({component: Source(path, prefix) for component, prefix in BUNDLE.items()})

    @classmethod
    def separate(cls, files: Mapping[Component, PathLike | Source]) -> Sources:
        """Components from files of their own: a path means prefix "", a `Source` gives the prefix."""
        return cls().with_files(files)

    @classmethod
    def split(cls, transformer: PathLike, text_encoder: PathLike | None, video_vae: PathLike | Source | None,
              audio_vae: PathLike | None, upsampler: PathLike | None = None,
              text_projection: PathLike | None = None) -> Sources:
        """The components of LTX-2.5's released files (`SPLIT`); a file not chosen yet (None, e.g. the text encoder
        in a loader node) leaves its components out. `video_vae` as a path is read with the prefix its tensors
        carry (`video_vae_prefix`), as a `Source` as given. A GGUF transformer, or a `text_projection` file, take
        the text path where `text_sources` finds it (headers only)."""
        files = {"transformer": transformer, "text encoder": text_encoder, "audio VAE": audio_vae}
        parts = {component: Source(Path(files[role]), prefix) for role, components in SPLIT.items()
                 if files[role] is not None for component, prefix in components.items()}
        if text_projection is not None or is_gguf(transformer):
            parts.pop(Component.TEXT_CONNECTORS)
            parts |= text_sources(transformer, text_projection)
        if video_vae is not None:
            video = video_vae if isinstance(video_vae, Source) else Source(Path(video_vae),
                                                                           video_vae_prefix(video_vae))
            parts |= {Component.VIDEO_DECODER: video, Component.VIDEO_ENCODER: video}
        return cls(parts).with_files({Component.UPSAMPLER: upsampler})

    def with_files(self, files: Mapping[Component, PathLike | Source | None]) -> Sources:
        """These sources with `files` (as in `separate`) replacing or adding components; None entries are skipped."""
        added = {component: _own_file(file) for component, file in files.items() if file is not None}
        return Sources({**self.parts, **added})

    def __getitem__(self, component: Component) -> Source:
        source = self.parts.get(component)
        if source is None:
            raise CheckpointError(f"no file was given for the {component.value} (the model's files give "
                                  f"{', '.join(c.value for c in self.parts) or 'nothing'})")
        return source

    def __contains__(self, component: object) -> bool:
        return component in self.parts


def text_sources(transformer: PathLike, text_projection: PathLike | None) -> dict[Component, Source]:
    """The text path a transformer file of its own and a `text_projection` file give (headers only): the connectors
    from the transformer when it holds them, else from `text_projection`; the projection from `text_projection`
    when it holds it, else from the transformer when it does (a GGUF of a whole bundle). What neither holds is left
    out (the text encoder file's projection stays, LTX-2.5's)."""
    found = {}
    if text_projection is not None:
        names = tensor_names(text_projection)
        prefix, projection = connector_prefix(names), BUNDLE[Component.TEXT_PROJECTION]
        if prefix is not None:
            found[Component.TEXT_CONNECTORS] = Source(Path(text_projection), prefix)
        if any(name.startswith(projection) for name in names):
            found[Component.TEXT_PROJECTION] = Source(Path(text_projection), projection)
    names = tensor_names(transformer)
    prefix, projection = connector_prefix(names), BUNDLE[Component.TEXT_PROJECTION]
    if prefix is not None:
        found[Component.TEXT_CONNECTORS] = Source(Path(transformer), prefix)
    if Component.TEXT_PROJECTION not in found and any(name.startswith(projection) for name in names):
        found[Component.TEXT_PROJECTION] = Source(Path(transformer), projection)  # a whole bundle's conversion
    return found


def connector_prefix(names: list[str]) -> str | None:
    """The prefix under which tensor `names` hold the text connectors (`model.diffusion_model.` as in a bundle, or
    "" where a conversion stripped it), None when they hold none."""
    for prefix in (BUNDLE[Component.TEXT_CONNECTORS], ""):
        if any(name.startswith(prefix + "video_embeddings_connector.") for name in names):
            return prefix
    return None


def tensor_names(path: PathLike) -> list[str]:
    """The tensor names of a safetensors or GGUF file (header / table only)."""
    return list(read_gguf(path).tensors if is_gguf(path) else read_header(Path(path)).tensors)


def duration_head_source(transformer: PathLike | None, own: PathLike | None = None) -> Source | None:
    """Where the duration head is (headers only): `own`, a file of its own, when given; else the transformer's file
    when it holds `duration_head.*` tensors (LTX-2.5's); None otherwise (LTX-2.0 / 2.3, a GGUF)."""
    if own is not None:
        return Source(Path(own), DURATION_HEAD_PREFIX)
    if transformer is None or is_gguf(transformer) or not os.path.isfile(transformer):
        return None
    names = read_header(Path(transformer)).tensors
    return Source(Path(transformer), DURATION_HEAD_PREFIX) if any(
        name.startswith(DURATION_HEAD_PREFIX) for name in names) else None


def component_source(source: PathLike | Source, component: Component) -> Source:
    """A loader's argument as a `Source`: a `Source` as given; a path as `component` of a bundled checkpoint, or as
    a file of its own for a component no bundle holds (the upsampler)."""
    if isinstance(source, Source):
        return source
    return Source(Path(source), BUNDLE.get(component, ""))


def video_vae_prefix(path: PathLike) -> str:
    """The prefix of a video VAE's tensors in the file at `path` (header only): the bundle's `vae.` when they carry
    it, "" when they are bare (`decoder.*`, `encoder.*`, `per_channel_statistics.*`, a VAE file of its own)."""
    prefix = BUNDLE[Component.VIDEO_DECODER]
    names = read_header(Path(path), "video VAE").tensors
    bare = not any(name.startswith(prefix) for name in names) and any(name.startswith(VIDEO_VAE_PARTS)
                                                                        for name in names)
    return "" if bare else prefix


def _own_file(file: PathLike | Source) -> Source:
    return file if isinstance(file, Source) else Source(Path(file))
