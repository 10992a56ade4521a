"""A GGUF file's fields and tensor table, read with the `gguf` package's `GGUFReader` (no tensor data read), every
tensor's byte count checked; the layout's meaning (an LTX-2 transformer, its text connectors) is `gguf_file`'s."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ltx2_core.errors import CorruptCheckpointError, UnsupportedQuantizationError
from ltx2_core.quant.gguf_types import TYPES, GgmlType


class GgufTensor(NamedTuple):
    """One tensor of the file: its ggml type, torch shape and stored bytes (uint8, a view of the mapped file)."""

    kind: GgmlType
    shape: tuple[int, ...]
    data: np.ndarray


class GgufFile(NamedTuple):
    path: Path
    architecture: str | None
    fields: dict[str, Any]  # the string and number fields
    tensors: dict[str, GgufTensor]  # by the name in the file


def is_gguf(path: str | os.PathLike) -> bool:
    """Whether `path` names a GGUF file (by its suffix)."""
    return str(path).lower().endswith(".gguf")


def read_gguf(path: str | os.PathLike) -> GgufFile:
    """The fields and tensor table of a GGUF file (no tensor read); CorruptCheckpointError for a truncated or
    damaged file, UnsupportedQuantizationError naming a ggml type this package does not dequantise."""
    import gguf  # only here: the rest of the package runs without it

    path = Path(path)
    try:
        reader = gguf.GGUFReader(path)
    except Exception as exc:  # the reader's errors for damaged files are ValueError, KeyError, IndexError...
        if "GGMLQuantizationType" in str(exc):
            raise UnsupportedQuantizationError(f"{path}: a tensor of an unknown ggml type ({exc}); {_TYPES_FIX}") \
                from exc
        raise CorruptCheckpointError(f"{path}: not a readable GGUF file ({type(exc).__name__}: {exc}); it is "
                                     "truncated or damaged: download it again") from exc
    fields = {}
    for name, field in reader.fields.items():
        if len(field.types) == 1 and field.types[0] == gguf.GGUFValueType.STRING:
            fields[name] = bytes(field.parts[field.data[-1]]).decode("utf-8", "replace")
        elif len(field.types) == 1 and field.types[0] != gguf.GGUFValueType.ARRAY:
            fields[name] = field.parts[field.data[-1]].tolist()[0]
        elif name.startswith(_ORIG_SHAPE):
            fields[name] = tuple(int(field.parts[i][0]) for i in field.data)
    tensors, end = {}, 0
    for t in reader.tensors:
        kind = TYPES.get(int(t.tensor_type))
        if kind is None:
            raise UnsupportedQuantizationError(f"{path}: tensor {t.name!r} is stored as "
                                               f"{t.tensor_type.name}, which this package does not dequantise; "
                                               f"{_TYPES_FIX}")
        shape = fields.get(_ORIG_SHAPE + t.name) or tuple(int(n) for n in reversed(t.shape.tolist()))
        count = int(np.prod(shape))
        data = np.asarray(t.data).reshape(-1).view(np.uint8)
        if data.size != kind.row_bytes(count) or count % kind.block_size:
            raise CorruptCheckpointError(f"{path}: tensor {t.name!r} has {data.size} bytes where {kind.name} "
                                         f"{list(shape)} needs {kind.row_bytes(count)}; the file is truncated or "
                                         "damaged: download it again")
        end = max(end, int(t.data_offset) + data.size)
        tensors[t.name] = GgufTensor(kind, shape, data)
    if end > os.path.getsize(path):
        raise CorruptCheckpointError(f"{path}: the tensors end at byte {end} but the file has "
                                     f"{os.path.getsize(path)}; it is truncated: download it again")
    return GgufFile(path, fields.get("general.architecture"), fields, tensors)


_ORIG_SHAPE = "comfy.gguf.orig_shape."
_TYPES_FIX = ("use a GGUF of F16, BF16, Q8_0, Q6_K, Q5_K, Q5_0, Q5_1, Q4_K, Q4_0, Q4_1, Q3_K or Q2_K weights")
