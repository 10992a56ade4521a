"""3-D neighborhood attention (NATTEN `na3d` semantics, dilation 1, non-causal) for the LTX-2.5 diffusion decoder.

Every query at (t, h, w) attends to the k_t×k_h×k_w keys of the window whose start on each axis is
`min(max(i − k//2, 0), L − k)`: centred in the interior and shifted inward at the borders (never clipped), so each
query sees exactly `k` keys per axis. The caller applies the softmax scale to q beforehand (scale 1 here).

comfy-kitchen ≥ 0.2.40 ships this as `comfy_kitchen.na3d` with CUDA/Triton kernels; it is imported optionally
because ComfyUI pins its own (older, na3d-less) comfy-kitchen, and a hard pin here would fight that pin. Without
it, `eager_na3d` below computes the same thing with plain SDPA over query blocks.
"""

from __future__ import annotations

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


def _window_mask(starts: list[int], keys: tuple[int, int], kernel: int, device: torch.device) -> torch.Tensor:
    """(queries, keys) bool: key `keys[0] + j` is inside query i's window."""
    first = torch.tensor(starts, device=device)[:, None]
    key = torch.arange(*keys, device=device)[None, :]
    return (key >= first) & (key < first + kernel)


def eager_na3d(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kernel: tuple[int, int, int]) -> torch.Tensor:
    """The pure-torch na3d: for each block of queries, SDPA over the box of keys its windows cover, with a mask
    keeping each query's own window. q, k, v (B, T, H, W, heads, D) -> same shape."""
    b, *size, heads, dim = q.shape
    out = torch.empty_like(v)
    starts = [window_starts(n, kk) for n, kk in zip(size, kernel)]
    ranges = [[(i, min(i + step, n)) for i in range(0, n, step)] for n, step in zip(size, QUERY_BLOCK)]
    for t0, t1 in ranges[0]:
        for h0, h1 in ranges[1]:
            for w0, w1 in ranges[2]:
                block = ((t0, t1), (h0, h1), (w0, w1))
                # the key box: from the first query's window start to the last query's window end, per axis
                boxes = [(s[a0], s[a1 - 1] + kk) for s, (a0, a1), kk in zip(starts, block, kernel)]
                masks = [_window_mask(s[a0:a1], box, kk, q.device)
                         for s, (a0, a1), box, kk in zip(starts, block, boxes, kernel)]
                mask = (masks[0][:, None, None, :, None, None] & masks[1][None, :, None, None, :, None]
                        & masks[2][None, None, :, None, None, :])
                queries = q[:, t0:t1, h0:h1, w0:w1]
                (k0, k1), (g0, g1), (x0, x1) = boxes
                keys, values = k[:, k0:k1, g0:g1, x0:x1], v[:, k0:k1, g0:g1, x0:x1]
                n_q, n_k = queries.shape[1] * queries.shape[2] * queries.shape[3], keys[0, ..., 0, 0].numel()
                attended = F.scaled_dot_product_attention(
                    queries.reshape(b, n_q, heads, dim).transpose(1, 2),
                    keys.reshape(b, n_k, heads, dim).transpose(1, 2),
                    values.reshape(b, n_k, heads, dim).transpose(1, 2),
                    attn_mask=mask.reshape(n_q, n_k), scale=1.0)
                out[:, t0:t1, h0:h1, w0:w1] = attended.transpose(1, 2).reshape(queries.shape)
    return out
