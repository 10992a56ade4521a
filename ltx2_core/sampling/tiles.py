"""Overlapping tiles of a video latent's (frames, rows, cols) grid, each refined alone and blended back with
linear ramps: how ltx-pipelines 1.2.0's HDR IC-LoRA (and DFR) refine a large latent in parts
(`TileCountConfig`, `split_by_count`, the trapezoidal masks and `VideoModalityTilingHelper.blend` of ltx-core).

A layout gives each axis a tile count and an overlap (latent cells shared by neighbours). Along an axis of n cells
cut into k tiles: each tile spans (n + overlap·(k − 1)) // k cells, the first (remainder) tiles one more, neighbours
sharing `overlap` cells; in a shared run the earlier tile's weight falls linearly (r/(o+1) ... 1/(o+1)) while the
later one's rises (1/(o+1) ... o/(o+1)), so the weights of every cell sum to 1 and the blend is a plain weighted sum.
The time axis is cut like the others (no causal first-frame rule: this is the latent, not the VAE's pixels).
A layout wider than the latent is clamped first (`clamp_layout`): an overlap above n − k comes down to n − k, and
an axis shorter than its tile count is not cut.
"""

from __future__ import annotations

import itertools
import logging
from typing import NamedTuple

import torch

log = logging.getLogger(__name__)


class AxisTiles(NamedTuple):
    """One axis' cut: `count` tiles sharing `overlap` cells with each neighbour (1, 0: not cut)."""

    count: int = 1
    overlap: int = 0


class TileLayout(NamedTuple):
    """Tile counts and overlaps of the (frames, rows, cols) axes of a video latent."""

    frames: AxisTiles = AxisTiles()
    rows: AxisTiles = AxisTiles()
    cols: AxisTiles = AxisTiles()


# the reference HDR IC-LoRA's stage-2 layout: 2 tiles on each axis, overlaps 8 (time) and 6 (space)
HDR_STAGE2_TILES = TileLayout(AxisTiles(2, 8), AxisTiles(2, 6), AxisTiles(2, 6))


class Tile(NamedTuple):
    """One tile: its (frames, rows, cols) slices of the latent and its blend weights (f, h, w) fp32."""

    slices: tuple[slice, slice, slice]
    weights: torch.Tensor


class Span(NamedTuple):
    start: int
    stop: int
    ramp_in: int
    ramp_out: int


def clamp_axis(axis: AxisTiles, size: int, name: str) -> AxisTiles:
    """`axis` fitted to `size` cells: not cut when shorter than its count; its overlap at most size − count."""
    if axis.count <= 1:
        return axis
    if size < axis.count:
        log.warning("%s tiles: %d cells cannot hold %d tiles; not cut", name, size, axis.count)
        return AxisTiles()
    if axis.overlap > size - axis.count:
        log.warning("%s tiles: overlap %d too wide for %d cells; %d", name, axis.overlap, size, size - axis.count)
        return AxisTiles(axis.count, size - axis.count)
    return axis


def clamp_layout(layout: TileLayout, grid: tuple[int, int, int]) -> TileLayout:
    """`layout` fitted to a latent grid (frames, rows, cols)."""
    return TileLayout(*(clamp_axis(axis, size, name)
                        for axis, size, name in zip(layout, grid, ("frame", "row", "column"))))


def axis_spans(axis: AxisTiles, size: int) -> list[Span]:
    """The tiles of one axis of `size` cells, in order."""
    count, overlap = axis
    if count < 1 or overlap < 0:
        raise ValueError(f"a tile count must be ≥ 1 and an overlap ≥ 0, got {count} and {overlap}")
    if count == 1 and overlap == 0:
        return [Span(0, size, 0, 0)]
    if count > size:
        raise ValueError(f"{count} tiles do not fit in {size} cells")
    if count == 1:
        return [Span(0, size, 0, 0)]
    total = size + overlap * (count - 1)
    length, extra = divmod(total, count)
    if length <= overlap:
        raise ValueError(f"{count} tiles of {size} cells with overlap {overlap} leave tiles of {length} cells, not "
                         "more than the overlap; use fewer tiles or a smaller overlap")
    step = length - overlap
    spans = []
    for index in range(count):  # tiles of `length` over size − extra cells, then the first `extra` grow by one
        start = index * step + min(index, extra)
        stop = (size if index == count - 1 else index * step + length + min(index, extra) + (index < extra))
        spans.append(Span(start, stop, overlap if index else 0, overlap if index < count - 1 else 0))
    return spans


def ramp_weights(span: Span) -> torch.Tensor:
    """The 1-D weights of a tile: 1 inside, rising k/(r+1) over its first r cells, falling over its last."""
    length = span.stop - span.start
    weights = torch.ones(length)
    if span.ramp_in > 0:
        weights[:span.ramp_in] *= torch.linspace(0.0, 1.0, span.ramp_in + 2)[1:-1]
    if span.ramp_out > 0:
        weights[length - span.ramp_out:] *= torch.linspace(1.0, 0.0, span.ramp_out + 2)[1:-1]
    return weights.clamp_(0, 1)


def tiles(layout: TileLayout, grid: tuple[int, int, int]) -> list[Tile]:
    """Every tile of `layout` on a latent grid (frames, rows, cols), frames slowest, then rows, then columns (the
    order a tile's index, and so its seed, follows)."""
    per_axis = [axis_spans(axis, size) for axis, size in zip(layout, grid)]
    out = []
    for spans in itertools.product(*per_axis):
        f, h, w = (ramp_weights(span) for span in spans)
        out.append(Tile(tuple(slice(s.start, s.stop) for s in spans), f[:, None, None] * h[None, :, None] * w))
    return out


__all__ = ["HDR_STAGE2_TILES", "AxisTiles", "Tile", "TileLayout", "axis_spans", "clamp_layout", "ramp_weights",
           "tiles"]
