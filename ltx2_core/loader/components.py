"""Loading one component (VAE, vocoder, upsampler, …) out of a safetensors file: checked key map, one read.

The module is built on `meta`, its state-dict keys are matched to file keys by a caller-given map, key set and shapes
are checked before any tensor is read, and the weights are assigned without a second allocation.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import torch
from torch import nn

from ltx2_core.errors import ConfigError, KeyMismatchError, MissingConfigError
from ltx2_core.loader.checkpoint import check_tensors, config_metadata
from ltx2_core.loader.safetensors_file import SafetensorsFile, read_header, read_tensors
from ltx2_core.model.statistics import STATISTICS


Config = TypeVar("Config")
Model = TypeVar("Model", bound=nn.Module)
FULL_CHECKPOINT_HINT = ("use a full LTX-2 checkpoint (e.g. ltx-2-19b-dev.safetensors or ltx-2.3-22b-dev.safetensors), "
                        "which bundles it, not a transformer-only, upsampler or LoRA file")


def section_config(file: SafetensorsFile, section: str, parse: Callable[[Any], Config], component: str) -> Config:
    """Parses one section of the `config` metadata; errors name the file (and, when absent, what to pass)."""
    value = config_metadata(file).get(section)
    if value is None:
        raise MissingConfigError(f"{file.path}: the 'config' metadata has no '{section}' section, so this file holds "
                                 f"no {component}; {FULL_CHECKPOINT_HINT}")
    try:
        return parse(value)
    except ConfigError as exc:
        raise type(exc)(f"{file.path}: {exc}") from exc


def load_bundled(
    path: str | os.PathLike,
    section: str,
    parse: Callable[[Any], Config],
    build: Callable[[Config], Model],
    prefixes: Mapping[str, str],
    component: str,
    *,
    statistics_prefix: str | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
) -> Model:
    """One component of a single-file checkpoint: config from its metadata `section`, built on meta, filled from
    the tensors under `prefixes` (and the two latent statistics under `statistics_prefix`), checked first."""
    file = read_header(path)
    config = section_config(file, section, parse, component)
    with torch.device("meta"):
        model = build(config)
    keys = prefixed_keys(file, prefixes)
    if not keys:
        raise KeyMismatchError(f"{file.path}: no {component} tensors (none under {', '.join(map(repr, prefixes))}) "
                               f"although its config has a '{section}' section; {FULL_CHECKPOINT_HINT}")
    if statistics_prefix is not None:
        keys |= statistics_keys(file, statistics_prefix)
    return load_module(file, model, keys, component, device=device, dtype=dtype)


def prefixed_keys(file: SafetensorsFile, prefixes: Mapping[str, str]) -> dict[str, str]:
    """Model key -> file key for every file tensor under one of `prefixes` (file prefix -> model prefix)."""
    keys = {}
    for name in file.tensors:
        for file_prefix, model_prefix in prefixes.items():
            if name.startswith(file_prefix):
                keys[model_prefix + name[len(file_prefix):]] = name
                break
    return keys


def statistics_keys(
    file: SafetensorsFile, file_prefix: str, model_prefix: str = "per_channel_statistics."
) -> dict[str, str]:
    """The two used statistics (`mean-of-means`, `std-of-means`) only; the file's other statistics are ignored."""
    return {model_prefix + s: file_prefix + s for s in STATISTICS if file_prefix + s in file.tensors}


def load_module(
    file: SafetensorsFile,
    model: nn.Module,
    keys: Mapping[str, str],
    component: str,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
) -> nn.Module:
    """Fills `model` (built on meta) from `file`; raises KeyMismatchError / ShapeMismatchError naming the file."""
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    check_tensors(file, keys, expected, component=component)
    state = read_tensors(file, keys, device=device, dtype=dtype)
    model.load_state_dict(state, strict=True, assign=True)
    _materialize_non_persistent(model, device)
    return model.eval()


def _materialize_non_persistent(model: nn.Module, device: torch.device | str) -> None:
    """Buffers that are not in the file (recomputed constants) are rebuilt by their module's `reset_buffers()`."""
    for module in model.modules():
        reset = getattr(module, "reset_buffers", None)
        if reset is not None and any(b.is_meta for b in module.buffers(recurse=False)):
            reset(device)
