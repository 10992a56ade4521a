"""Where each component's weights are: one file and a key prefix per component (spec §8).

LTX-2.0 and 2.3 ship one bundled checkpoint: the DiT, the text projection and connectors, the video VAE, the audio
VAE and the vocoder in one file, each under its own prefix (`BUNDLE`), with one `config` metadata entry holding a
section per component (`SECTIONS`). The latent upsampler is always a file of its own. A release that ships its
components as separate files maps them with `Sources.separate` (prefix "" unless the file nests its tensors).

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


class Component(str, Enum):
    """A separately loaded part of an LTX-2 model; the value names it in messages."""

    TRANSFORMER = "transformer"
    TEXT_PROJECTION = "text projection"  # the feature extractor over the language model's hidden states
    TEXT_CONNECTORS = "text connectors"  # the video and audio embeddings connectors
    VIDEO_DECODER = "video VAE decoder"
    VIDEO_ENCODER = "video VAE encoder"
    AUDIO_DECODER = "audio decoder"
    VOCODER = "vocoder"
    UPSAMPLER = "latent upsampler"


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
    Component.VOCODER: "vocoder",
})
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


def component_source(source: PathLike | Source, component: Component) -> Source:
    """A loader's argument as a `Source`: a `Source` as given; a path as `component` of a bundled checkpoint, or as
    a file of its own for a component no bundle holds (the upsampler)."""
    if isinstance(source, Source):
        return source
    return Source(Path(source), BUNDLE.get(component, ""))


def _own_file(file: PathLike | Source) -> Source:
    return file if isinstance(file, Source) else Source(Path(file))
