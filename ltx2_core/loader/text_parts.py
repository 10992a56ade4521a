"""The part of the prompt encoder one rank of a text pipeline loads (issue 38, item 2): Gemma's layers [start, end),
the token embeddings (the first rank) and the head, the final norm and the text projection (the last rank).

The tensors of the other parts are never read from disk: they stay on `meta`, with the shape and dtype the whole
load gives them (the file's, cast to the load's dtype as `read_tensors` casts), so the model's structure, its dtypes
and what `meta` tensors count (`memory.text_file_bytes`) are those of the whole encoder. `TextPart.nothing()` loads
no weight at all: the whole encoder on `meta`, sized from the files' headers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

import torch

from ltx2_core.loader.safetensors_file import SafetensorsFile, read_tensors
from ltx2_core.quant.files import StoredFormats, default_scales

# safetensors dtype -> torch dtype (the floats and fp8 a text encoder or its projection stores)
TORCH_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
                "F8_E4M3": torch.float8_e4m3fn, "F8_E5M2": torch.float8_e5m2, "U8": torch.uint8, "I8": torch.int8,
                "I16": torch.int16, "I32": torch.int32, "I64": torch.int64, "BOOL": torch.bool}


class TextPart(NamedTuple):
    """What a rank loads: Gemma's layers [start, end), the embeddings, the head (final norm + projection)."""

    start: int
    end: int
    embeddings: bool
    head: bool

    @classmethod
    def nothing(cls) -> TextPart:
        """No weight read: the whole encoder on `meta` (its bytes from the headers)."""
        return cls(0, 0, False, False)

    def holds(self, key: str) -> bool:
        """Whether Gemma's model key `key` is this part's; the keys outside the layers, embeddings and final norm
        (none in Gemma 3 and 4 but buffers rebuilt from the config) are every part's."""
        if key.startswith("layers."):
            return self.start <= int(key.split(".")[1]) < self.end
        if key.startswith("embed_tokens."):
            return self.embeddings
        if key.startswith("norm."):
            return self.head
        return True


def loaded_dtype(stored: str, dtype: torch.dtype | None, kept: bool) -> torch.dtype:
    """The dtype `read_tensors` gives a tensor stored as `stored`: cast to `dtype` when floating and not `kept`."""
    native = TORCH_DTYPES[stored]
    return dtype if dtype is not None and native.is_floating_point and not kept else native


def meta_tensors(file: SafetensorsFile, keys: Mapping[str, str], dtype: torch.dtype | None,
                 kept: Iterable[str] = ()) -> dict[str, torch.Tensor]:
    """Model key -> a `meta` tensor of the shape and dtype the whole load reads for it (nothing read)."""
    kept = set(kept)
    return {key: torch.empty(file.tensors[name].shape, device="meta",
                             dtype=loaded_dtype(file.tensors[name].dtype, dtype, key in kept))
            for key, name in keys.items()}


def part_state(shards: Iterable[tuple[SafetensorsFile, StoredFormats]], merged: StoredFormats, part: TextPart,
               device: torch.device | str, dtype: torch.dtype | None) -> dict[str, torch.Tensor]:
    """Gemma's state: the part's tensors read onto `device`, the others on `meta` (as `gemma_files.load_gemma`
    reads the whole, fp8 weights and their scales kept as stored)."""
    state = {key: value if part.holds(key) else value.to("meta")
             for key, value in default_scales(merged, device).items()}
    for file, plan in shards:
        held = {key: name for key, name in plan.keys.items() if part.holds(key)}
        state |= meta_tensors(file, {k: n for k, n in plan.keys.items() if k not in held}, dtype, plan.kept)
        state |= read_tensors(file, held, device=device, dtype=dtype, keep=plan.kept)
    return state


def projection_state(shards: Iterable[tuple[SafetensorsFile, StoredFormats]], plan: StoredFormats,
                     dtype: torch.dtype | None, gguf: Iterable[str] = ()) -> dict[str, torch.Tensor]:
    """The text projection's state on `meta` with the loaded dtypes (`text_weights._fill`'s; a GGUF's tensors
    dequantised into `dtype`, else the other files' float weights' dtype, else bf16)."""
    gguf = set(gguf)
    state = {key: value.to("meta") for key, value in default_scales(plan, "cpu").items()}
    for file, part in shards:
        if str(file.path) not in gguf:
            state |= meta_tensors(file, part.keys, dtype, part.kept)
    floats = [t.dtype for k, t in state.items() if t.is_floating_point() and k.endswith(".weight")]
    into = dtype or next(iter(floats), torch.bfloat16)
    for file, part in shards:
        if str(file.path) in gguf:
            state |= {key: torch.empty(file.tensors[name].shape, device="meta", dtype=into)
                      for key, name in part.keys.items()}
    return state
