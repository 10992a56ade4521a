"""Reading a safetensors file's header and tensors, with errors that say what is wrong with the file.

The header is parsed here (8-byte little-endian length, then JSON) so that a renamed pickle, a truncated download or
a damaged header is reported before any tensor is read. Tensors are then read by the `safetensors` library, one
by one, so only what a model needs is ever loaded. Nothing is ever unpickled.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import torch
from safetensors import safe_open

from ltx2_core.errors import CheckpointError, CorruptCheckpointError, NotSafetensorsError

DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}
MAX_HEADER_BYTES = 100_000_000  # the safetensors library's own limit
_PICKLE_HINT = (
    "only .safetensors files are loaded (never pickles, which can run code); download the .safetensors release of "
    "the model instead of a .ckpt/.pt/.bin file"
)


@dataclass(frozen=True)
class TensorEntry:
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class SafetensorsFile:
    """A checked safetensors file: its path, string metadata and tensor table (nothing loaded yet)."""

    path: Path
    metadata: Mapping[str, str]
    tensors: Mapping[str, TensorEntry]


def read_header(path: str | os.PathLike, what: str = "checkpoint") -> SafetensorsFile:
    """Parses and checks the header; raises NotSafetensorsError / CorruptCheckpointError naming the file.

    `what` names the file's role in the messages for a missing path or a directory ("LoRA", "latent upsampler", …).
    """
    path = Path(path)
    if not path.is_file():
        raise _not_a_file(path, what)
    size = path.stat().st_size
    with path.open("rb") as f:
        prefix = f.read(8)
        _reject_pickles(path, prefix)
        if len(prefix) < 8:
            raise CorruptCheckpointError(f"{path}: only {size} bytes, too short for a safetensors header; "
                                         "the file is truncated, download it again")
        (header_len,) = struct.unpack("<Q", prefix)
        first = f.read(1)
        if first != b"{":
            raise NotSafetensorsError(f"{path}: not a safetensors file (no JSON header after the 8-byte length); "
                                      + _PICKLE_HINT)
        _check_header_length(path, header_len, size)
        raw = first + f.read(header_len - 1)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptCheckpointError(f"{path}: the safetensors header is not valid JSON ({exc}); "
                                     "the file is damaged, download it again") from exc
    if not isinstance(header, dict):
        raise CorruptCheckpointError(f"{path}: the safetensors header is not a JSON object; the file is damaged")
    metadata = header.pop("__metadata__", None) or {}
    tensors = {name: _entry(path, name, info, size - 8 - header_len) for name, info in header.items()}
    return SafetensorsFile(path, metadata, tensors)


def folder_listing(folder: Path) -> str:
    """' (it holds a.safetensors, b.safetensors, …)' for the first safetensors files in `folder`, else ''."""
    names = sorted(p.name for p in folder.glob("*.safetensors"))
    if not names:
        return ""
    return f" (it holds {', '.join(names[:3])}{', …' if len(names) > 3 else ''})"


def _not_a_file(path: Path, what: str) -> CheckpointError:
    if path.is_dir():
        return CheckpointError(f"{what} {path} is a directory, not a .safetensors file{folder_listing(path)}; "
                               "pass the .safetensors file itself")
    return CheckpointError(f"{what} not found: {path} (check the file name and the models folder)")


def _check_header_length(path: Path, header_len: int, size: int) -> None:
    """The 8-byte length field against the file size (a cut download) and the library's limit (a damaged field)."""
    if 8 + header_len > size:
        raise CorruptCheckpointError(
            f"{path}: the header claims {header_len} bytes but the file has only {size} bytes; the file is "
            "truncated or damaged (an interrupted download?), download it again"
        )
    if header_len > MAX_HEADER_BYTES:
        raise CorruptCheckpointError(
            f"{path}: the header claims {header_len} bytes, implausibly large (safetensors allows at most "
            f"{MAX_HEADER_BYTES}); the header's length field is damaged, download the file again"
        )
    if header_len < 2:
        raise CorruptCheckpointError(f"{path}: the header claims {header_len} bytes, too few for a JSON object; "
                                     "the header's length field is damaged, download the file again")


def _reject_pickles(path: Path, prefix: bytes) -> None:
    if prefix[:4] == b"PK\x03\x04":
        raise NotSafetensorsError(f"{path}: this is a zip archive (a PyTorch .pt/.ckpt checkpoint?), "
                                  "not safetensors; " + _PICKLE_HINT)
    if len(prefix) >= 2 and prefix[0] == 0x80 and 2 <= prefix[1] <= 5:
        raise NotSafetensorsError(f"{path}: this is a Python pickle, not safetensors; " + _PICKLE_HINT)


def _entry(path: Path, name: str, info: object, data_bytes: int) -> TensorEntry:
    try:
        dtype, shape, (start, end) = info["dtype"], tuple(info["shape"]), info["data_offsets"]
    except (TypeError, KeyError, ValueError) as exc:
        raise CorruptCheckpointError(f"{path}: header entry {name!r} is malformed ({info!r})") from exc
    if dtype not in DTYPE_BYTES:
        raise CorruptCheckpointError(f"{path}: tensor {name!r} has unknown dtype {dtype!r}")
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end):
        raise CorruptCheckpointError(f"{path}: tensor {name!r} has invalid data offsets {[start, end]}")
    if end > data_bytes:
        raise CorruptCheckpointError(f"{path}: tensor {name!r} ends at byte {end} of the data section but the file "
                                     f"holds only {data_bytes}; the file is truncated, download it again")
    if end - start != math.prod(shape) * DTYPE_BYTES[dtype]:
        raise CorruptCheckpointError(f"{path}: tensor {name!r} of shape {list(shape)} {dtype} does not match its "
                                     f"{end - start} data bytes; the file is damaged")
    return TensorEntry(dtype, shape)


class Shard(NamedTuple):
    """The part of a tensor a rank holds: `part` of dimension `dim`."""

    dim: int
    part: slice

    def of(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor[(slice(None),) * self.dim + (self.part,)]


def read_tensors(
    file: SafetensorsFile,
    names: Mapping[str, str],
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
    shards: Mapping[str, Shard] | None = None,
    keep: Collection[str] = (),
) -> dict[str, torch.Tensor]:
    """Reads only the tensors in `names` (model key -> file key), cast to `dtype` when floating (except the keys in
    `keep`, e.g. fp8 weights and their scales); a model key in `shards` reads only its shard from the file
    (`get_slice`), never the whole tensor."""
    out, shards = {}, shards or {}
    with safe_open(str(file.path), framework="pt", device=str(device)) as f:
        for key, file_key in names.items():
            shard = shards.get(key)
            tensor = f.get_tensor(file_key) if shard is None else shard.of(f.get_slice(file_key))
            if dtype is not None and tensor.is_floating_point() and key not in keep:
                tensor = tensor.to(dtype)
            out[key] = tensor
    return out
