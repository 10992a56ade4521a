"""A plain quantiser for the GGUF K types (Q6_K, Q5_K, Q4_K, Q3_K, Q2_K), which the `gguf` package (0.19) cannot
quantise: per sub-block min-max (or max-abs) scales, the super-block's scales quantised to their 6 or 4 bits, the
weights rounded to the nearest level of the quantised scales, packed in llama.cpp's block layouts (the inverse of
`ltx2_core.quant.gguf_types`' dequantisation). llama.cpp's quantiser also searches each sub-block for the scale
with the least error; this one does not, so its errors are upper bounds of a real file's."""

from __future__ import annotations

import numpy as np

QK_K = 256


def _pack(values: np.ndarray, halves: int, fields: int, run: int, width: int) -> np.ndarray:
    """(n, 256) small ints -> bytes (n, halves · run): value at h·fields·run + s·run + j goes to byte h·run + j,
    bits s·width (the inverse of `gguf_types._bits` over reshaped runs)."""
    v = values.astype(np.uint8).reshape(-1, halves, fields, run)
    out = np.zeros((v.shape[0], halves, run), np.uint8)
    for s in range(fields):
        out |= v[:, :, s, :] << np.uint8(s * width)
    return out.reshape(v.shape[0], halves * run)


def _f16(values: np.ndarray) -> np.ndarray:
    return values.astype(np.float16).reshape(-1, 1).view(np.uint8)


def _safe(values: np.ndarray) -> np.ndarray:
    return np.where(values == 0, 1.0, values)


def _asymmetric(x: np.ndarray, subs: int, levels: int, scale_bits: int):
    """(d, dmin, scale codes, min codes, weight codes) of (n, 256) weights in `subs` sub-blocks with min offsets."""
    n = x.shape[0]
    blocks = x.reshape(n, subs, -1)
    low = np.minimum(blocks.min(-1), 0.0)
    scale = (blocks.max(-1) - low) / levels
    top = (1 << scale_bits) - 1
    d = scale.max(-1, keepdims=True) / top
    dmin = (-low).max(-1, keepdims=True) / top
    d, dmin = d.astype(np.float16).astype(np.float32), dmin.astype(np.float16).astype(np.float32)
    sc = np.clip(np.rint(scale / _safe(d)), 0, top)
    mn = np.clip(np.rint(-low / _safe(dmin)), 0, top)
    step, offset = (d * sc)[..., None], (dmin * mn)[..., None]
    q = np.clip(np.rint((blocks + offset) / _safe(step)), 0, levels)
    return d, dmin, sc.astype(np.uint8), mn.astype(np.uint8), q.reshape(n, QK_K).astype(np.uint8)


def _symmetric(x: np.ndarray, subs: int, lowest: int, scale_bits: int):
    """(d, signed scale codes, signed weight codes in [lowest, -lowest - 1]) of (n, 256) weights."""
    n = x.shape[0]
    blocks = x.reshape(n, subs, -1)
    scale = np.abs(blocks).max(-1) / -lowest
    top = (1 << (scale_bits - 1)) - 1
    d = (scale.max(-1, keepdims=True) / top).astype(np.float16).astype(np.float32)
    sc = np.clip(np.rint(scale / _safe(d)), -top - 1, top)
    q = np.clip(np.rint(blocks / _safe((d * sc)[..., None])), lowest, -lowest - 1)
    return d, sc.astype(np.int8), q.reshape(n, QK_K).astype(np.int16)


def _scales_k4(sc: np.ndarray, mn: np.ndarray) -> np.ndarray:
    """The 12 bytes of 8 six-bit scales and mins (Q4_K, Q5_K)."""
    d, m, md = sc[:, :4].copy(), mn[:, :4].copy(), np.zeros((sc.shape[0], 4), np.uint8)
    d |= (sc[:, 4:] >> 4) << 6
    m |= (mn[:, 4:] >> 4) << 6
    md |= (sc[:, 4:] & 0x0F) | ((mn[:, 4:] & 0x0F) << 4)
    return np.concatenate((d, m, md), axis=1)


def quantise_k(data: np.ndarray, kind: str) -> np.ndarray:
    """(rows, cols) fp32 -> (rows, cols / 256 · block bytes) uint8 in K type `kind` (cols whole 256-weight blocks)."""
    rows = data.shape[0]
    x = data.reshape(-1, QK_K).astype(np.float32)
    if kind == "Q6_K":
        d, sc, q = _symmetric(x, 16, -32, 8)
        u = (q + 32).astype(np.uint8)
        parts = (_pack(u & 15, 2, 2, 64, 4), _pack(u >> 4, 2, 4, 32, 2), sc.view(np.uint8), _f16(d))
    elif kind == "Q3_K":
        d, sc, q = _symmetric(x, 16, -4, 6)
        u, codes = (q + 4).astype(np.uint8), (sc.astype(np.int16) + 32).astype(np.uint8)
        packed = np.concatenate(((codes[:, :8] & 15) | ((codes[:, 8:] & 15) << 4),
                                 _pack(codes >> 4, 1, 4, 4, 2)), axis=1)
        parts = (_pack(u >> 2, 1, 8, 32, 1), _pack(u & 3, 2, 4, 32, 2), packed, _f16(d))
    elif kind in ("Q4_K", "Q5_K"):
        d, dmin, sc, mn, q = _asymmetric(x, 8, 15 if kind == "Q4_K" else 31, 6)
        head = (_f16(d), _f16(dmin), _scales_k4(sc, mn))
        parts = (*head, _pack(q, 4, 2, 32, 4)) if kind == "Q4_K" else \
            (*head, _pack(q >> 4, 1, 8, 32, 1), _pack(q & 15, 4, 2, 32, 4))
    elif kind == "Q2_K":
        d, dmin, sc, mn, q = _asymmetric(x, 16, 3, 4)
        parts = (sc | (mn << 4), _pack(q, 2, 4, 32, 2), _f16(d), _f16(dmin))
    else:
        raise ValueError(f"no K quantiser for {kind}")
    return np.concatenate(parts, axis=1).reshape(rows, -1)
