"""An LTX-2 model file: config metadata, the DiT's keys, and key/shape validation (spec §8).

The official single file bundles the DiT, the text connectors and projection, the video VAE, the audio VAE and the
vocoder; each loader takes its own prefix from `sources` and leaves the rest. Transformer-only files in other
layouts are told apart in `layouts`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.errors import ConfigError, KeyMismatchError, MissingConfigError, ShapeMismatchError
from ltx2_core.loader.layouts import OFFICIAL, check_transformer_metadata, transformer_layout
from ltx2_core.loader.safetensors_file import SafetensorsFile

TRANSFORMER_PREFIX = OFFICIAL.prefix
# the text connectors' names under the DiT prefix of a bundle (`sources.BUNDLE`): they belong to the text path
CONNECTORS = ("video_embeddings_connector.", "audio_embeddings_connector.")
SHOWN_KEYS = 5


def config_metadata(file: SafetensorsFile) -> dict[str, Any]:
    """The parsed `config` metadata JSON; MissingConfigError when absent."""
    raw = file.metadata.get("config")
    if raw is None:
        raise MissingConfigError(
            f"{file.path}: no 'config' metadata, so the model shape is unknown. Use an official LTX-2 checkpoint "
            "(they all carry it) or pass an explicit config (e.g. TransformerConfig.from_metadata({...}))."
        )
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise MissingConfigError(f"{file.path}: the 'config' metadata is not valid JSON ({exc})") from exc
    if not isinstance(parsed, dict):
        raise MissingConfigError(f"{file.path}: the 'config' metadata is not a JSON object")
    return parsed


def transformer_config(file: SafetensorsFile) -> TransformerConfig:
    """TransformerConfig from the file's `config` metadata (`transformer` section) and `model_version`.

    The layout is checked first, so a diffusers or transformer-only file is named as such (see `layouts`)."""
    check_transformer_metadata(file, transformer_layout(file))
    section = config_metadata(file).get("transformer")
    if section is None:
        raise MissingConfigError(
            f"{file.path}: the 'config' metadata has no 'transformer' section; is this a VAE/upsampler/LoRA file "
            "rather than an LTX-2 model checkpoint?"
        )
    try:
        return TransformerConfig.from_metadata(section, file.metadata.get("model_version"))
    except ConfigError as exc:
        raise type(exc)(f"{file.path}: {exc}") from exc


def transformer_keys(
    tensor_names: Mapping[str, object] | list[str], prefix: str = TRANSFORMER_PREFIX
) -> dict[str, str]:
    """Model key -> file key for the DiT tensors under `prefix` (prefix stripped; connectors excluded)."""
    connectors = tuple(prefix + name for name in CONNECTORS)
    return {
        name[len(prefix):]: name
        for name in tensor_names
        if name.startswith(prefix) and not name.startswith(connectors)
    }


def check_tensors(
    file: SafetensorsFile, keys: Mapping[str, str], expected: Mapping[str, tuple[int, ...]], component: str
) -> None:
    """Raises KeyMismatchError / ShapeMismatchError unless `keys` covers exactly `expected` with equal shapes."""
    missing = sorted(set(expected) - set(keys))
    unexpected = sorted(set(keys) - set(expected))
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"{len(missing)} missing (e.g. {_first(missing)})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected (e.g. {_first([keys[k] for k in unexpected])})")
        raise KeyMismatchError(
            f"{file.path}: the {component} tensors do not match its config: {'; '.join(parts)}. The file is "
            "incomplete or from another model/variant; use the official checkpoint or pass the matching config."
        )
    for key, shape in expected.items():
        found = file.tensors[keys[key]].shape
        if tuple(found) != tuple(shape):
            raise ShapeMismatchError(
                f"{file.path}: tensor {keys[key]!r} has shape {list(found)} but the {component} config expects "
                f"{list(shape)}; the config metadata does not describe these weights"
            )


def _first(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN_KEYS])
    return shown + (", …" if len(names) > SHOWN_KEYS else "")
