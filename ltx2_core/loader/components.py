"""Loading one component (VAE, vocoder, upsampler, …) out of a safetensors file: checked key map, one read.

The module is built on `meta`, its state-dict keys are matched to file keys by a caller-given map, key set and shapes
are checked before any tensor is read, and the weights are assigned without a second allocation.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from ltx2_core.loader.checkpoint import check_tensors
from ltx2_core.loader.safetensors_file import SafetensorsFile, read_tensors
from ltx2_core.model.statistics import STATISTICS


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
