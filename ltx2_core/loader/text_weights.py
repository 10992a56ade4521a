"""The text path of an LTX-2 model and the whole prompt encoder (text encoder + model files), checked before loading.

The feature extractor (`Component.TEXT_PROJECTION`) and the two connectors (`Component.TEXT_CONNECTORS`, named
`{video,audio}_embeddings_connector.*` there) come from their `Sources`, one file or two; in the single-file
checkpoint they are `text_embedding_projection.*` and `model.diffusion_model.{video,audio}_embeddings_connector.*`
(spec §8). They map onto `TextProjection`'s `feature_extractor.*`, `video_connector.*` and `audio_connector.*`.
A GGUF transformer's connectors are read dequantised (`gguf_file.read_gguf_tensors`); the text path is sized by the
transformer file's config, else the connectors file's, else from the shapes (`text_shapes`).
"""

from __future__ import annotations

import functools

import json
import os
from typing import NamedTuple

import torch

from ltx2_core.errors import CheckpointError, ConfigError, MissingConfigError
from ltx2_core.loader.checkpoint import check_tensors, config_metadata, transformer_config
from ltx2_core.loader.components import prefixed_keys, union_view
from ltx2_core.quant.files import StoredFormats, default_scales, install_layers, read_formats
from ltx2_core.loader.gemma_files import GemmaSource, find_gemma, load_gemma
from ltx2_core.loader.gguf_file import gguf_header, gguf_transformer_config, read_gguf_tensors
from ltx2_core.loader.gguf_reader import is_gguf
from ltx2_core.loader.vision_weights import load_vision_tower
from ltx2_core.loader.safetensors_file import SafetensorsFile, read_header, read_tensors
from ltx2_core.loader.sources import SECTIONS, Component, Source, Sources
from ltx2_core.loader.text_parts import TextPart, projection_state
from ltx2_core.loader.text_shapes import text_config_from_shapes
from ltx2_core.model.text.encoder import PromptEncoder, check_prompt_length
from ltx2_core.model.text.projection import TextProjection
from ltx2_core.model.text.config import TextConfig
from ltx2_core.model.text.gemma3 import GEMMA3
from ltx2_core.model.text.gemma4 import GEMMA4
from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.releases import ModelVersion

# the projection's three parts: (component, name inside its source, model prefix in `TextProjection`)
_PARTS = (
    (Component.TEXT_PROJECTION, "", "feature_extractor."),
    (Component.TEXT_CONNECTORS, "video_embeddings_connector.", "video_connector."),
    (Component.TEXT_CONNECTORS, "audio_embeddings_connector.", "audio_connector."),
)
_CONNECTOR_KEYS = ("connector_", "audio_connector_")  # a `transformer` section's keys of the text connectors
_FEATURE_WEIGHTS = ("aggregate_embed.weight", "video_aggregate_embed.weight")


def text_key_prefixes(sources: Sources) -> dict[str, str]:
    """File prefix -> model prefix of the feature extractor and the two connectors."""
    return {sources[component].key(name): model_prefix for component, name, model_prefix in _PARTS}


def text_keys(sources: Sources, file: SafetensorsFile) -> dict[str, str]:
    """Model key -> file key of the text projection's and connectors' tensors that `file` holds."""
    prefixes = {sources[component].key(name): model_prefix for component, name, model_prefix in _PARTS
                if sources[component].path == file.path}
    return prefixed_keys(file, prefixes)


def text_config(file: SafetensorsFile) -> TextConfig:
    name = SECTIONS[Component.TEXT_CONNECTORS]
    section = config_metadata(file).get(name)
    if section is None:
        raise MissingConfigError(f"{file.path}: the 'config' metadata has no '{name}' section; is this an "
                                 "LTX-2 model checkpoint?")
    try:
        return TextConfig.from_metadata(section, file.metadata.get("model_version"))
    except ConfigError as exc:
        raise type(exc)(f"{file.path}: {exc}") from exc


def feature_width(source: Source, file: SafetensorsFile) -> int:
    """Input width of the text projection: the language model's hidden size × hidden states (188160 for Gemma 3
    12B)."""
    names = [source.key(name) for name in _FEATURE_WEIGHTS]
    for name in names:
        if name in file.tensors:
            return file.tensors[name].shape[1]
    raise CheckpointError(f"{file.path}: no text projection ({' or '.join(names)}); prompts need the "
                          "full LTX-2 checkpoint, not a transformer-only or distilled-LoRA file (with a GGUF or "
                          "transformer-only file, give the text projection file: --text-projection, ComfyUI's "
                          "ltx-2*-embeddings_connector*.safetensors or the official checkpoint)")


def check_compatible(gemma: GemmaSource, source: Source, file: SafetensorsFile) -> None:
    """The language model must produce exactly the features the projection was trained on."""
    features = feature_width(source, file)
    produced = gemma.hidden_size * gemma.num_hidden_states
    if produced != features:
        raise CheckpointError(
            f"text encoder {gemma.path} does not fit checkpoint {file.path}: its hidden size "
            f"{gemma.hidden_size} × {gemma.num_hidden_states} hidden states gives {produced} features, but the "
            f"checkpoint's text projection takes {features} (Gemma 3 12B: 3840 × 49 = 188160). Use the "
            f"{gemma.backbone.name} text encoder this model was trained with (LTX-2.0/2.3: gemma_3_12B_it*."
            "safetensors; LTX-2.5: gemma4-12b-with-proj-ltx-2.5-bf16.safetensors)."
        )


def check_gemma_pairing(gemma: GemmaSource, transformer: SafetensorsFile, config: TransformerConfig) -> None:
    """The text encoder must be the Gemma the transformer was trained with, from headers only (as ltx-core 1.2.0):
    a transformer naming `gemma_source_checkpoint.gemma_version` (LTX-2.5) needs the text encoder whose
    `gemma_config.gemma_version` is the same; an LTX-2.0/2.3 model refuses LTX-2.5's Gemma 4 (and any text encoder
    naming a `gemma_version`), an LTX-2.5 one Gemma 3."""
    expected = _gemma_source_version(transformer)
    release = f"LTX-{config.version.value}"
    if expected is not None and gemma.gemma_version != expected:
        found = (f"is {gemma.backbone.name} (LTX-2.0/2.3's text encoder, no gemma_version)"
                 if gemma.gemma_version is None else f"has gemma_version={gemma.gemma_version!r}")
        raise CheckpointError(
            f"Gemma version mismatch: the {release} transformer {transformer.path} was trained with the Gemma "
            f"whose gemma_version is {expected!r}, but text encoder {gemma.path} {found}. Pick the text encoder of "
            "the same release (LTX-2.5: text_encoders/gemma4-12b-with-proj-ltx-2.5-bf16.safetensors).")
    if expected is None and config.version is ModelVersion.V2_5 and gemma.backbone is GEMMA3:
        raise CheckpointError(
            f"the {release} transformer {transformer.path} needs the Gemma 4 text encoder, but {gemma.path} is "
            f"{gemma.backbone.name}; pick text_encoders/gemma4-12b-with-proj-ltx-2.5-bf16.safetensors.")
    later = gemma.backbone is GEMMA4 or gemma.gemma_version is not None  # an LTX-2.5 text encoder
    if expected is None and config.version is not ModelVersion.V2_5 and later:
        raise CheckpointError(
            f"the {release} model {transformer.path} was trained with Gemma 3 12B, but text encoder {gemma.path} is "
            f"{gemma.backbone.name} (LTX-2.5's); pick gemma_3_12B_it*.safetensors (or the LTX-2.5 transformer "
            "for this text encoder).")


def _gemma_source_version(transformer: SafetensorsFile) -> str | None:
    """`gemma_source_checkpoint.gemma_version` of a transformer's metadata (LTX-2.5), None when absent."""
    raw = transformer.metadata.get("gemma_source_checkpoint")
    if raw is None:
        return None
    try:
        source = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{transformer.path}: the 'gemma_source_checkpoint' metadata is not valid JSON "
                              f"({exc})") from exc
    version = source.get("gemma_version") if isinstance(source, dict) else None
    if version is None:
        raise CheckpointError(f"{transformer.path}: the 'gemma_source_checkpoint' metadata names no gemma_version")
    return str(version)


class _Projection(NamedTuple):
    """The projection built on `meta` and, per file it reads from, that file's key map and fp8 layers."""

    model: TextProjection
    shards: tuple[tuple[SafetensorsFile, StoredFormats], ...]
    plan: StoredFormats  # all shards' plans merged


def _projection_on_meta(sources: Sources, gemma: GemmaSource) -> _Projection:
    """The projection built on `meta` and its key maps (with the linears a file stores in fp8, e.g. ComfyUI's
    fp8_scaled connectors; a GGUF's are dequantised), validated against the files (nothing read yet)."""
    parts = (Component.TRANSFORMER, Component.TEXT_PROJECTION, Component.TEXT_CONNECTORS)
    headers = {path: _header(path) for path in dict.fromkeys(sources[component].path for component in parts)}
    features = sources[Component.TEXT_PROJECTION]
    sized_by = headers[sources[Component.TRANSFORMER].path]
    dit_config = (gguf_transformer_config(sized_by.path) if is_gguf(sized_by.path) else
                  transformer_config(sized_by))
    check_gemma_pairing(gemma, sized_by, dit_config)
    check_compatible(gemma, features, headers[features.path])
    files = [headers[path] for path in dict.fromkeys(sources[c].path for c, _, _ in _PARTS)]
    keys = {file.path: text_keys(sources, file) for file in files}
    config, named = _text_config(sources, headers, keys, dit_config)
    try:
        config.check_matches(dit_config)
    except ConfigError as exc:
        raise type(exc)(f"{named}: {exc}") from exc
    with torch.device("meta"):
        projection = TextProjection(config, gemma.hidden_size, gemma.num_hidden_states)
    shards = tuple((file, StoredFormats({}, keys[file.path]) if is_gguf(file.path) else
                    read_formats(file, keys[file.path])) for file in files)
    plan = StoredFormats.union(plan for _, plan in shards)
    expected = install_layers(projection, plan, features.path)
    check_tensors(union_view(shards), plan.keys, expected, component="text projection and connectors")
    return _Projection(projection, shards, plan)


def _header(path) -> SafetensorsFile:
    return gguf_header(path) if is_gguf(path) else read_header(path)


def _text_config(sources: Sources, headers: dict, keys: dict, dit_config: TransformerConfig
                 ) -> tuple[TextConfig, object]:
    """(the text path's config, the file it comes from): the transformer file's `transformer` section where it
    describes the connectors (the official files; a GGUF's `config` field may hold the DiT's keys only), else the
    connectors file's, else from the shapes (`text_shapes`)."""
    for component in (Component.TRANSFORMER, Component.TEXT_CONNECTORS):
        file = headers[sources[component].path]
        section = _sections(file).get(SECTIONS[component])
        if isinstance(section, dict) and any(key.startswith(_CONNECTOR_KEYS) for key in section):
            return text_config(file), file.path
    shapes = {key: headers[path].tensors[file_key].shape for path, file_keys in keys.items()
              for key, file_key in file_keys.items()}
    path = sources[Component.TEXT_CONNECTORS].path
    return text_config_from_shapes(shapes, dit_config, path), path


def _sections(file: SafetensorsFile) -> dict:
    """The file's `config` sections; none when it has no `config` metadata (a file of ComfyUI's, a GGUF)."""
    return config_metadata(file) if "config" in file.metadata else {}


def _fill(projection: _Projection, device: torch.device | str, dtype: torch.dtype | None) -> TextProjection:
    """Reads the weights; a GGUF's into `dtype`, else the other files' float dtype (bf16 where it is all GGUF)."""
    state = default_scales(projection.plan, device)
    for file, plan in projection.shards:
        if not is_gguf(file.path):
            state |= read_tensors(file, plan.keys, device=device, dtype=dtype, keep=plan.kept)
    floats = [value.dtype for key, value in state.items() if value.is_floating_point() and key.endswith(".weight")]
    for file, plan in projection.shards:
        if is_gguf(file.path):
            state |= read_gguf_tensors(file.path, plan.keys, device=device, dtype=dtype or next(iter(floats), None))
    projection.model.load_state_dict(state, strict=True, assign=True)
    return projection.model.eval().requires_grad_(False)


def _on_meta(projection: _Projection, dtype: torch.dtype | None) -> TextProjection:
    """The projection left on `meta` (nothing read) with the shapes and dtypes `_fill` would give it."""
    gguf = [str(file.path) for file, _ in projection.shards if is_gguf(file.path)]
    state = projection_state(projection.shards, projection.plan, dtype, gguf)
    projection.model.load_state_dict(state, strict=True, assign=True)
    return projection.model.eval().requires_grad_(False)


def load_text_projection(
    sources: Sources | str | os.PathLike,
    gemma: GemmaSource,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
) -> TextProjection:
    """The feature extractor + connectors, sized for (and checked against) the language model. `sources`: the
    model's `Sources` or the bundled checkpoint's path."""
    return _fill(_projection_on_meta(_sources(sources), gemma), device, dtype)


def load_prompt_encoder(
    text_encoder: str | os.PathLike,
    checkpoint: Sources | str | os.PathLike,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
    offload_device: torch.device | str | None = None,
    max_length: int | None = None,
    part: TextPart | None = None,
) -> PromptEncoder:
    """Gemma (ComfyUI file or HF folder) + the model's text path (`checkpoint`: its `Sources` or the bundled
    checkpoint's path), as one `PromptEncoder`.

    Both files are inspected and cross-checked (family, sizes, key sets, shapes, tokenizer) before any weight is
    read. Weights load onto `offload_device` when given (they visit `device` only while encoding), else `device`.
    To stream Gemma's layers from host memory while it encodes: `ltx2_core.memory.offload.load_streamed_prompt_encoder`.
    `part` (a text pipeline's rank, `loader.text_parts`): only its layers, embeddings and head are read, the rest
    stays on `meta`; `TextPart.nothing()`: no weight read (the encoder's structure and sizes).
    """
    gemma = find_gemma(text_encoder)
    projection = _projection_on_meta(_sources(checkpoint), gemma)
    tokenizer = gemma.tokenizer(max_length)
    check_prompt_length(tokenizer.max_length, projection.model.config)
    home = offload_device if offload_device is not None else device
    model = load_gemma(gemma, device=home, dtype=dtype, part=part)
    filled = _fill(projection, home, dtype) if part is None or part.head else _on_meta(projection, dtype)
    encoder = PromptEncoder(tokenizer, model, filled, backbone=gemma.backbone, device=device,
                            offload_device=offload_device)
    encoder.gemma_source = gemma
    encoder.load_vision = functools.partial(load_vision_tower, gemma)
    return encoder


def _sources(sources: Sources | str | os.PathLike) -> Sources:
    return sources if isinstance(sources, Sources) else Sources.bundled(sources)
