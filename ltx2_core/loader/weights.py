"""Build a model on the `meta` device and fill it from a checkpoint with `assign=True` (no double allocation)."""

from __future__ import annotations

import os

import torch

from ltx2_core.config import TransformerConfig
from ltx2_core.loader.checkpoint import check_tensors, transformer_config, transformer_keys
from ltx2_core.loader.safetensors_file import read_header, read_tensors
from ltx2_core.model.transformer import LTX2Transformer


def load_transformer(
    path: str | os.PathLike,
    config: TransformerConfig | None = None,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
) -> LTX2Transformer:
    """The DiT of a single-file LTX-2 checkpoint; `config` overrides the file's metadata.

    Everything about the file is checked before any tensor is read: format, header, config, key set and shapes.
    Only the DiT's own tensors are read; `dtype` (e.g. torch.bfloat16) casts floating tensors while loading.
    """
    file = read_header(path)
    config = config or transformer_config(file)
    with torch.device("meta"):
        model = LTX2Transformer(config)
    keys = transformer_keys(file.tensors)
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    check_tensors(file, keys, expected, component="transformer")
    state = read_tensors(file, keys, device=device, dtype=dtype)
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval()
