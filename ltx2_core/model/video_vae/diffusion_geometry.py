"""Edge padding and cropping of one axis, as the LTX-2.5 diffusion decoder does it around its attention windows.

Two policies, the reference's: in time the last slice is repeated (or slices are dropped from the end); in space
both edges are replicated, the odd one extra at the end (or the same split is cropped).
"""

from __future__ import annotations

import torch


def resize_axis(x: torch.Tensor, dim: int, size: int, symmetric: bool) -> tuple[torch.Tensor, int]:
    """Pads or crops axis `dim` of `x` to `size`; returns the result and how much was added (or removed) before
    the start: always 0 unless `symmetric`."""
    length = x.shape[dim]
    if length == size:
        return x, 0
    need = abs(size - length)
    before = need // 2 if symmetric else 0
    if length > size:
        return x.narrow(dim, before, size), before
    parts = [x.narrow(dim, 0, 1).expand(*x.shape[:dim], before, *x.shape[dim + 1:])] if before else []
    after = need - before
    parts += [x, x.narrow(dim, length - 1, 1).expand(*x.shape[:dim], after, *x.shape[dim + 1:])]
    return torch.cat(parts, dim=dim), before


def symmetric_pad(x: torch.Tensor, dim: int, floor: int) -> tuple[torch.Tensor, int]:
    """Edge-replicates axis `dim` up to `floor` when shorter; returns it and the pad before the start."""
    if x.shape[dim] >= floor:
        return x, 0
    return resize_axis(x, dim, floor, symmetric=True)


def trapezoid(length: int, left: int, right: int) -> torch.Tensor:
    """(length,) blend weights: linear fade-in over `left` and fade-out over `right` samples, neither reaching
    0 (the reference's symmetric trapezoid)."""
    mask = torch.ones(length)
    left, right = max(0, min(left, length)), max(0, min(right, length))
    if left:
        mask[:left] *= torch.linspace(0.0, 1.0, left + 2)[1:-1]
    if right:
        mask[-right:] *= torch.linspace(1.0, 0.0, right + 2)[1:-1]
    return mask
