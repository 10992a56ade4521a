"""3-D neighborhood attention (NATTEN `na3d` semantics, dilation 1, non-causal) for the LTX-2.5 diffusion decoder.

Every query at (t, h, w) attends to the k_t×k_h×k_w keys of the window whose start on each axis is
`min(max(i − k//2, 0), L − k)`: centred in the interior and shifted inward at the borders (never clipped), so each
query sees exactly `k` keys per axis. The caller applies the softmax scale to q beforehand (scale 1 here).

comfy-kitchen ≥ 0.2.40 ships this as `comfy_kitchen.na3d` with CUDA/Triton kernels; it is imported optionally
because ComfyUI pins its own (older, na3d-less) comfy-kitchen, and a hard pin here would fight that pin. Without
it, `eager_na3d` below computes the same thing with plain SDPA over query blocks.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import torch
import torch.nn.functional as F

try:  # optional accelerated kernels: see the module docstring for why this is not a requirement
    from comfy_kitchen import na3d as _kitchen_na3d
except ImportError:
    _kitchen_na3d = None

QUERY_BLOCK = (4, 16, 16)  # (t, h, w) queries per SDPA call of the eager path: a few thousand keys each


def kitchen_available() -> bool:
    """True when the installed comfy-kitchen has `na3d`."""
    return _kitchen_na3d is not None


def na3d(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kernel: tuple[int, int, int],
         use_kitchen: bool | None = None) -> torch.Tensor:
    """q, k, v (B, T, H, W, heads, head_dim), q pre-scaled -> (B, T, H, W, heads, head_dim) in v's dtype.

    Uses comfy-kitchen's kernels when installed (`use_kitchen=None`), else (or with `use_kitchen=False`) the eager
    version. Raises ValueError when an axis is shorter than its kernel (the decoder pads so this never happens).
    """
    check_extent(tuple(q.shape[1:4]), kernel)
    q, k = q.to(v.dtype), k.to(v.dtype)
    if use_kitchen is None:
        use_kitchen = _kitchen_na3d is not None
    if use_kitchen:
        if _kitchen_na3d is None:
            raise RuntimeError("comfy-kitchen with na3d is not installed: pip install 'comfy-kitchen>=0.2.40'")
        return _kitchen_na3d(q, k, v, list(kernel), is_causal=None, scale=1.0)
    return eager_na3d(q, k, v, kernel)


def check_extent(size: tuple[int, ...], kernel: tuple[int, int, int]) -> None:
    """ValueError unless every axis of `size` (T, H, W) is at least its kernel."""
    if any(n < k for n, k in zip(size, kernel)):
        raise ValueError(f"neighborhood attention needs (T, H, W) ≥ kernel {tuple(kernel)}; got {tuple(size)}. "
                         "Decode through DiffusionVideoDecoder.decode, which pads small latents first.")


def window_starts(length: int, kernel: int) -> list[int]:
    """First key index of each query's window on one axis, shifted inward at the borders (plain ints: no device
    round trip for the geometry)."""
    return [min(max(i - kernel // 2, 0), length - kernel) for i in range(length)]


GATHER_BYTES = 256 * 2**20  # keys and values gathered for one SDPA call of the eager path


class _AxisGroup(NamedTuple):
    """The query blocks of one axis whose windows fall alike inside their key boxes: their first queries, their
    boxes' first keys, and the (block length, box length) mask keeping each query's own window."""

    query_starts: list[int]
    box_starts: list[int]
    mask: torch.Tensor  # (block length, box length) bool


def _axis_groups(length: int, kernel: int, block: int, device: torch.device) -> list[_AxisGroup]:
    """One axis cut into query blocks of `block`, grouped: the interior blocks share one pattern, the border ones
    (windows shifted inward, a shorter last block) a few more."""
    starts = window_starts(length, kernel)
    found: dict[tuple[tuple[int, ...], int], tuple[list[int], list[int]]] = {}
    for first in range(0, length, block):
        last = min(first + block, length)
        box = starts[first]
        relative = tuple(start - box for start in starts[first:last])
        queries, boxes = found.setdefault((relative, starts[last - 1] + kernel - box), ([], []))
        queries.append(first)
        boxes.append(box)
    groups = []
    for (relative, box_length), (queries, boxes) in found.items():
        first = torch.tensor(relative, device=device)[:, None]
        key = torch.arange(box_length, device=device)[None, :]
        groups.append(_AxisGroup(queries, boxes, (key >= first) & (key < first + kernel)))
    return groups


def _indices(starts: list[int], length: int, device: torch.device) -> torch.Tensor:
    """(len(starts), length): the positions of each block (or box) on its axis."""
    return torch.tensor(starts, device=device)[:, None] + torch.arange(length, device=device)[None, :]


def eager_na3d(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kernel: tuple[int, int, int]) -> torch.Tensor:
    """The pure-torch na3d: queries cut into blocks of QUERY_BLOCK; every block attends by SDPA to the box of keys
    its windows cover, masked to each query's own window. Blocks whose windows sit alike in their boxes share one
    mask, so they run batched, as many per call as GATHER_BYTES of gathered keys and values allow (a few calls per
    layer instead of one per block: the per-block loop was launch-bound on a GPU).
    q, k, v (B, T, H, W, heads, D) -> same shape."""
    b, *size, heads, dim = q.shape
    out = torch.empty_like(v)
    axes = [_axis_groups(n, kk, step, q.device) for n, kk, step in zip(size, kernel, QUERY_BLOCK)]
    for gt, gh, gw in itertools.product(*axes):
        masks = (gt.mask, gh.mask, gw.mask)
        (qt, bt), (qh, bh), (qw, bw) = (m.shape for m in masks)
        mask = (masks[0][:, None, None, :, None, None] & masks[1][None, :, None, None, :, None]
                & masks[2][None, None, :, None, None, :]).reshape(qt * qh * qw, bt * bh * bw)
        per_block = 2 * bt * bh * bw * heads * dim * k.element_size() * b
        rows = max(1, GATHER_BYTES // (per_block * len(gw.query_starts) * len(gh.query_starts)))
        w_query, w_box = _indices(gw.query_starts, qw, q.device), _indices(gw.box_starts, bw, q.device)
        h_query, h_box = _indices(gh.query_starts, qh, q.device), _indices(gh.box_starts, bh, q.device)
        for first in range(0, len(gt.query_starts), rows):
            t_query = _indices(gt.query_starts[first:first + rows], qt, q.device)
            t_box = _indices(gt.box_starts[first:first + rows], bt, q.device)
            query_index = (t_query[:, None, None, :, None, None], h_query[None, :, None, None, :, None],
                           w_query[None, None, :, None, None, :])
            box_index = (t_box[:, None, None, :, None, None], h_box[None, :, None, None, :, None],
                         w_box[None, None, :, None, None, :])
            queries = q[(slice(None), *query_index)]  # (B, blocks t, h, w, qt, qh, qw, heads, D)
            blocks = queries.shape[:4]
            keys, values = (x[(slice(None), *box_index)].reshape(-1, bt * bh * bw, heads, dim).transpose(1, 2)
                            for x in (k, v))
            attended = F.scaled_dot_product_attention(
                queries.reshape(-1, qt * qh * qw, heads, dim).transpose(1, 2), keys, values, attn_mask=mask,
                scale=1.0)
            out[(slice(None), *query_index)] = attended.transpose(1, 2).reshape(*blocks, qt, qh, qw, heads, dim)
    return out
