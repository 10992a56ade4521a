"""Loading one component (VAE, vocoder, upsampler, …) out of a safetensors file: checked key map, one read.

The module is built on `meta`, its state-dict keys are matched to file keys by a caller-given map, key set and shapes
are checked before any tensor is read, and the weights are assigned without a second allocation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import torch
from torch import nn

from ltx2_core.errors import ConfigError, KeyMismatchError, MissingConfigError
from ltx2_core.loader.checkpoint import check_tensors, config_metadata
from ltx2_core.loader.safetensors_file import SafetensorsFile, read_header, read_tensors
from ltx2_core.loader.sources import SECTIONS, Component, Source
from ltx2_core.model.statistics import STATISTICS
from ltx2_core.quant.files import StoredFormats


Config = TypeVar("Config")
Model = TypeVar("Model", bound=nn.Module)
FULL_CHECKPOINT_HINT = ("use a full LTX-2 checkpoint (e.g. ltx-2-19b-dev.safetensors or ltx-2.3-22b-dev.safetensors), "
                        "which bundles it, not a transformer-only, upsampler or LoRA file")


def section_config(file: SafetensorsFile, section: str, parse: Callable[[Any], Config], component: str,
                   fallback: Callable[[SafetensorsFile], Any] | None = None) -> Config:
    """Parses one section of the `config` metadata (a file without it: `fallback`'s section, e.g. a released one its
    shapes tell, when it gives one); errors name the file (and, when absent, what to pass)."""
    value = config_metadata(file).get(section) if "config" in file.metadata or fallback is None else None
    if value is None and fallback is not None:
        value = fallback(file)
    if value is None:
        raise MissingConfigError(f"{file.path}: the 'config' metadata has no '{section}' section, so this file holds "
                                 f"no {component}; {FULL_CHECKPOINT_HINT}")
    try:
        return parse(value)
    except ConfigError as exc:
        raise type(exc)(f"{file.path}: {exc}") from exc


def load_component(
    source: Source,
    component: Component,
    parse: Callable[[Any], Config],
    build: Callable[[Config], Model],
    parts: Mapping[str, str],
    *,
    statistics: str | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
    fallback: Callable[[SafetensorsFile], Any] | None = None,
) -> Model:
    """One component from its `source`: config from the file's metadata section for it (`SECTIONS`; `fallback` as
    in `section_config`), built on meta, filled from the tensors under the source prefix + each of `parts` (name in
    the component -> model prefix) and the two latent statistics under the source prefix + `statistics`, checked
    first."""
    file = read_header(source.path)
    section, name = SECTIONS[component], component.value
    config = section_config(file, section, parse, name, fallback)
    with torch.device("meta"):
        model = build(config)
    prefixes = {source.key(part): model_prefix for part, model_prefix in parts.items()}
    keys = prefixed_keys(file, prefixes)
    if not keys:
        raise KeyMismatchError(f"{file.path}: no {name} tensors (none under {', '.join(map(repr, prefixes))}) "
                               f"although its config has a '{section}' section; {FULL_CHECKPOINT_HINT}")
    if statistics is not None:
        keys |= statistics_keys(file, source.key(statistics))
    return load_module(file, model, keys, name, device=device, dtype=dtype)


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


def union_view(shards: Sequence[tuple[SafetensorsFile, StoredFormats]]) -> SafetensorsFile:
    """The tensor table of the shards' planned keys as one file (named by the first), for one key/shape check; a
    single shard is itself."""
    if len(shards) == 1:
        return shards[0][0]
    return SafetensorsFile(shards[0][0].path, {}, {fk: file.tensors[fk] for file, plan in shards
                                                  for fk in plan.keys.values()})


def _materialize_non_persistent(model: nn.Module, device: torch.device | str) -> None:
    """Buffers that are not in the file (recomputed constants) are rebuilt by their module's `reset_buffers()`."""
    for module in model.modules():
        reset = getattr(module, "reset_buffers", None)
        if reset is not None and any(b.is_meta for b in module.buffers(recurse=False)):
            reset(device)
