"""Rotary position embeddings of LTX-2 (spec §1.8): fractional positions, split and interleaved layouts.

Tables are built once per run (positions do not change while denoising) and broadcast over the batch when all
samples share positions. Both layouts are stored per head, `(B, tokens, heads, ·)`, so tensor-parallel code can slice
its local heads with one `narrow`.
"""

from __future__ import annotations

import math

import torch

from ltx2_core.types import Rope


def frequency_grid(theta: float, n_axes: int, dim: int, float64: bool, device: torch.device | None = None) -> torch.Tensor:
    """ω_k = θ^(k/(F−1))·π/2 for k < F = dim // (2·n_axes), returned in fp32 (computed in fp64 when asked)."""
    count = dim // (2 * n_axes)
    dtype = torch.float64 if float64 else torch.float32
    exponents = torch.linspace(0.0, 1.0, count, dtype=dtype)
    if float64:
        grid = (theta**exponents) * math.pi / 2
    else:
        grid = (theta**exponents).to(torch.float32) * math.pi / 2
    return grid.to(device=device, dtype=torch.float32)


def _angles(positions: torch.Tensor, max_pos: tuple[float, ...], grid: torch.Tensor, middle: bool) -> torch.Tensor:
    """positions (B, axes, T, 2) [start, end) bounds -> angles (B, T, F·axes), axis index fastest."""
    if middle:
        points = (positions[..., 0] + positions[..., 1]) / 2.0
    else:
        points = positions[..., 0]
    fractions = torch.stack([points[:, i] / max_pos[i] for i in range(points.shape[1])], dim=-1)  # (B, T, axes)
    angles = grid.to(fractions.device) * (fractions.unsqueeze(-1) * 2 - 1)  # (B, T, axes, F)
    return angles.transpose(-1, -2).flatten(2)


def rope_tables(
    positions: torch.Tensor,
    *,
    dim: int,
    heads: int,
    max_pos: tuple[float, ...],
    theta: float,
    rope_type: str,
    float64: bool,
    dtype: torch.dtype,
    middle: bool = True,
    freqs: bool = False,
) -> Rope:
    """cos/sin tables for `dim` = heads·head_dim channels from positions `(B, axes, tokens, 2)`; `freqs`: also
    comfy-kitchen's rotation matrices (`Rope.freqs`, for its fused RoPE kernels; `kernels.rope_fused`)."""
    n_axes = positions.shape[1]
    if n_axes != len(max_pos):
        raise ValueError(f"positions have {n_axes} axes but max_pos has {len(max_pos)} entries")
    grid = frequency_grid(theta, n_axes, dim, float64)
    angles = _angles(positions, max_pos, grid, middle)
    batch, tokens, used = angles.shape
    cos, sin = angles.cos(), angles.sin()
    if rope_type == "interleaved":
        cos, sin = cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)
        pad = dim - 2 * used
    elif rope_type == "split":
        pad = dim // 2 - used
    else:
        raise ValueError(f"unknown rope_type {rope_type!r}")
    if pad:
        # unused leading channels rotate by 0: cos 1, sin 0
        cos = torch.cat([torch.ones_like(cos[..., :pad]), cos], dim=-1)
        sin = torch.cat([torch.zeros_like(sin[..., :pad]), sin], dim=-1)
    shape = (batch, tokens, heads, -1)
    cos, sin = cos.reshape(shape).to(dtype), sin.reshape(shape).to(dtype)
    return Rope(cos, sin, rotation_matrices(cos, sin, rope_type) if freqs else None)


def apply_rope(x: torch.Tensor, rope: Rope, rope_type: str) -> torch.Tensor:
    """Rotates x `(B, tokens, heads, head_dim)` by the tables of `rope_tables` (same heads, or a local slice)."""
    cos, sin = rope.cos, rope.sin
    if rope_type == "split":
        # each head's channels are split in halves (x1, x2): y1 = x1·cos − x2·sin, y2 = x2·cos + x1·sin
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
    # interleaved: pairs (2j, 2j+1) rotate; rot(x)_{2j} = −x_{2j+1}, rot(x)_{2j+1} = x_{2j}
    pairs = x.unflatten(-1, (-1, 2))
    rotated = torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2)
    return x * cos + rotated * sin


def rotation_matrices(cos: torch.Tensor, sin: torch.Tensor, rope_type: str) -> torch.Tensor:
    """Our tables (B, tokens, heads, ·) -> comfy-kitchen's `freqs_cis` (B, tokens, heads, head_dim/2, 2, 2): per
    pair [[cos, −sin], [sin, cos]] (interleaved tables repeat each angle twice: every second column is read)."""
    if rope_type == "interleaved":
        cos, sin = cos[..., ::2], sin[..., ::2]
    return torch.stack([cos, -sin, sin, cos], dim=-1).unflatten(-1, (2, 2))
