"""The ggml tensor types of GGUF files and their dequantisation in torch ops (any device, no host reads).

A GGUF tensor of a block type is a run of blocks, each `type_size` bytes coding `block_size` consecutive weights
along the last (ggml: first) axis. `dequantize` takes those bytes as a uint8 tensor (any leading shape, rows of whole
blocks) and returns the weights; it equals the `gguf` package's numpy dequantisation (`tests/unit/test_gguf_dequant.py`).
The layouts are llama.cpp's (ggml-quants); the ids are ggml's `GGMLQuantizationType` values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch


class GgmlType(NamedTuple):
    """One ggml tensor type: its id in files, its name, weights per block and bytes per block."""

    id: int
    name: str
    block_size: int
    type_size: int

    @property
    def quantised(self) -> bool:
        """A block format (kept in bytes, dequantised per use), not a plain float."""
        return self.name not in FLOATS

    def row_bytes(self, count: int) -> int:
        """Bytes of `count` weights (a multiple of `block_size`)."""
        return count // self.block_size * self.type_size


QK_K = 256  # weights per super-block of the K types
FLOATS = ("F32", "F16", "BF16")


def _f16(blocks: torch.Tensor, start: int) -> torch.Tensor:
    """(n, 1) fp32 from the little-endian fp16 at bytes start:start+2 of each (n, size) block."""
    return blocks[:, start:start + 2].contiguous().view(torch.float16).float()


def _nibbles(qs: torch.Tensor) -> torch.Tensor:
    """(n, k) bytes -> (n, 2k): the low nibbles of all bytes, then the high nibbles."""
    return torch.cat((qs & 0x0F, qs >> 4), dim=-1)


def _bits(data: torch.Tensor, width: int) -> torch.Tensor:
    """(n, k) bytes -> (n, 8 // width, k): each byte's `width`-bit fields, lowest first (field s of byte j at
    [:, s, j])."""
    shifts = torch.arange(0, 8, width, device=data.device, dtype=torch.uint8)
    return (data.unsqueeze(1) >> shifts.view(1, -1, 1)) & ((1 << width) - 1)


def _q8_0(b: torch.Tensor) -> torch.Tensor:
    return _f16(b, 0) * b[:, 2:].contiguous().view(torch.int8).float()


def _q4_0(b: torch.Tensor) -> torch.Tensor:
    return _f16(b, 0) * (_nibbles(b[:, 2:]).to(torch.int8) - 8).float()


def _q4_1(b: torch.Tensor) -> torch.Tensor:
    return _f16(b, 0) * _nibbles(b[:, 4:]).float() + _f16(b, 2)


def _high_bits_32(qh: torch.Tensor) -> torch.Tensor:
    """(n, 4) bytes of a little-endian uint32 -> (n, 32) bits, bit i at i."""
    return _bits(qh, 1).permute(0, 2, 1).reshape(qh.shape[0], 32)


def _q5_0(b: torch.Tensor) -> torch.Tensor:
    q = _nibbles(b[:, 6:]) | (_high_bits_32(b[:, 2:6]) << 4)
    return _f16(b, 0) * (q.to(torch.int8) - 16).float()


def _q5_1(b: torch.Tensor) -> torch.Tensor:
    q = _nibbles(b[:, 8:]) | (_high_bits_32(b[:, 4:8]) << 4)
    return _f16(b, 0) * q.float() + _f16(b, 2)


def _q2_k(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    scales, qs = b[:, :16], b[:, 16:80]
    d, dmin = _f16(b, 80), _f16(b, 82)
    dl = (d * (scales & 0x0F).float()).view(n, 16, 1)
    ml = (dmin * (scales >> 4).float()).view(n, 16, 1)
    q = _bits(qs.reshape(n * 2, 32), 2).reshape(n, 16, 16).float()  # halves of 128, shifts 0,2,4,6, 32 each
    return (dl * q - ml).reshape(n, QK_K)


def _q3_k(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    hmask, qs, packed = b[:, :32], b[:, 32:96], b[:, 96:108]
    d = _f16(b, 108)
    low = _nibbles(packed[:, :8])  # scales 0-7 low nibbles, then 8-15
    high = _bits(packed[:, 8:12], 2).reshape(n, 16)  # 2 high bits: byte i % 4, shift 2·(i // 4)
    scales = ((low | (high << 4)).to(torch.int8) - 32).float()
    dl = (d * scales).view(n, 16, 1)
    ql = _bits(qs.reshape(n * 2, 32), 2).reshape(n, 16, 16)
    hm = _bits(hmask, 1).reshape(n, 16, 16)  # bit j of byte l: weight 32·j + l
    q = (ql.to(torch.int8) - ((hm ^ 1) << 2).to(torch.int8)).float()
    return (dl * q).reshape(n, QK_K)


def _scale_min_k4(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The 8 six-bit scales and mins of a Q4_K / Q5_K block from its 12 bytes, each (n, 8) fp32."""
    d, m, md = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]
    scale = torch.cat((d & 0x3F, (md & 0x0F) | ((d >> 2) & 0x30)), dim=-1)
    low = torch.cat((m & 0x3F, (md >> 4) | ((m >> 2) & 0x30)), dim=-1)
    return scale.float(), low.float()


def _q4_k(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    sc, m = _scale_min_k4(b[:, 4:16])
    d = (_f16(b, 0) * sc).view(n, 8, 1)
    dm = (_f16(b, 2) * m).view(n, 8, 1)
    q = _bits(b[:, 16:].reshape(n * 4, 32), 4).reshape(n, 8, 32).float()
    return (d * q - dm).reshape(n, QK_K)


def _q5_k(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    sc, m = _scale_min_k4(b[:, 4:16])
    d = (_f16(b, 0) * sc).view(n, 8, 1)
    dm = (_f16(b, 2) * m).view(n, 8, 1)
    ql = _bits(b[:, 48:].reshape(n * 4, 32), 4).reshape(n, 8, 32)
    qh = _bits(b[:, 16:48], 1).reshape(n, 8, 32)
    return (d * (ql | (qh << 4)).float() - dm).reshape(n, QK_K)


def _q6_k(b: torch.Tensor) -> torch.Tensor:
    n = b.shape[0]
    ql, qh, scales = b[:, :128], b[:, 128:192], b[:, 192:208]
    d = (_f16(b, 208) * scales.contiguous().view(torch.int8).float()).view(n, 16, 1)
    low = _bits(ql.reshape(n * 2, 64), 4).reshape(n, 8, 32)  # halves of 64 bytes: low nibbles, high nibbles
    high = _bits(qh.reshape(n * 2, 32), 2).reshape(n, 8, 32)
    q = ((low | (high << 4)).to(torch.int8) - 32).reshape(n, 16, 16).float()
    return (d * q).reshape(n, QK_K)


def _plain(dtype: torch.dtype) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda b: b.contiguous().view(dtype).float()


TYPES: dict[int, GgmlType] = {t.id: t for t in (
    GgmlType(0, "F32", 1, 4), GgmlType(1, "F16", 1, 2), GgmlType(30, "BF16", 1, 2),
    GgmlType(2, "Q4_0", 32, 18), GgmlType(3, "Q4_1", 32, 20), GgmlType(6, "Q5_0", 32, 22), GgmlType(7, "Q5_1", 32, 24),
    GgmlType(8, "Q8_0", 32, 34), GgmlType(10, "Q2_K", QK_K, 84), GgmlType(11, "Q3_K", QK_K, 110),
    GgmlType(12, "Q4_K", QK_K, 144), GgmlType(13, "Q5_K", QK_K, 176), GgmlType(14, "Q6_K", QK_K, 210),
)}
_DEQUANTIZE: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "F32": _plain(torch.float32), "F16": _plain(torch.float16), "BF16": _plain(torch.bfloat16),
    "Q4_0": _q4_0, "Q4_1": _q4_1, "Q5_0": _q5_0, "Q5_1": _q5_1, "Q8_0": _q8_0,
    "Q2_K": _q2_k, "Q3_K": _q3_k, "Q4_K": _q4_k, "Q5_K": _q5_k, "Q6_K": _q6_k,
}


def dequantize(data: torch.Tensor, kind: GgmlType, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """The weights of `shape` (torch order: the block axis last) coded by the uint8 `data` of ggml type `kind`."""
    blocks = data.reshape(-1, kind.type_size)
    return _DEQUANTIZE[kind.name](blocks).reshape(shape).to(dtype)
