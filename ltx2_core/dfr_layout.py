"""The DFR (long clip) canvas: the keyframe segment grid, the temporal tiles of each x2 round, and their stitch.

DFR pads the clip's `frames - 1` up to a whole number of segments (24 or 32 pixel frames, whichever pads least, 32 on a
tie) and puts one generated keyframe slot on every segment boundary after frame 0 (the last frame included). A
temporal round doubles the frame grid and splits the canvas into tiles that own contiguous runs of segments; every tile
but the first starts one segment early, so the seam it shares with the previous tile lies inside its window, and that
lead-in (plus the seam's own latent frame, which the previous tile keeps) is dropped when the tiles are stitched.

Pure integer code apart from the stitch; equal to ltx-pipelines 1.2.0's `dfr_layout` (tests/unit/test_dfr_layout.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import NamedTuple

import torch

SEGMENTS = (24, 32)  # pixel frames per keyframe segment
LEAD_SEGMENTS = 1  # segments a non-first tile reaches back through its seam
FRAMES_PER_LATENT = 8  # the video VAE's temporal factor (geometry's 8-frame latent)


class Tile(NamedTuple):
    """One temporal tile of a round, in global coordinates of that round's frame grid.

    `pixel_start`/`pixel_end` are inclusive pixel frames, `latent_start`/`latent_stop` a half-open latent range;
    `anchors` are the seam keyframes inside the window (frame 0 is none), `slots` the mid-segment frames this tile
    generates, `drop` the latent frames the stitch discards from the tile's start."""

    pixel_start: int
    pixel_end: int
    latent_start: int
    latent_stop: int
    anchors: tuple[int, ...]
    slots: tuple[int, ...]
    drop: int


def _padding(content: int, segment: int) -> int:
    return -content % segment


def segment_length(content: int) -> int:
    """The segment of `SEGMENTS` that pads `content` (= frames - 1) least; the longer one on a tie."""
    if content < 1:
        raise ValueError(f"a DFR canvas needs at least 2 frames (got {content + 1})")
    return min(SEGMENTS, key=lambda segment: (_padding(content, segment), -segment))


def canvas(frames: int, temporal: int = FRAMES_PER_LATENT) -> tuple[int, int, list[int]]:
    """(padded frame count, segment, slot frames) of a clip of `frames` (8k+1) pixel frames.

    The slots sit at segment, 2·segment, ... up to the padded clip's last frame; frame 0 has none."""
    if frames < 2 or (frames - 1) % temporal:
        raise ValueError(f"DFR needs a frame count of the form {temporal}k+1 with k >= 1 (got {frames})")
    content = frames - 1
    segment = segment_length(content)
    padded = content + _padding(content, segment)
    return padded + 1, segment, list(range(segment, padded + 1, segment))


def latent_index(pixel: int, temporal: int = FRAMES_PER_LATENT) -> int:
    """The latent frame of pixel frame `pixel`, which must lie on a latent border (0 or a multiple of `temporal`)."""
    if pixel < 0 or pixel % temporal:
        raise ValueError(f"pixel frame {pixel} is not on a {temporal}-frame latent border")
    return pixel // temporal


def _owned_runs(segments: int, tiles: int) -> list[int]:
    """`segments` split into `tiles` contiguous runs, the longer runs first."""
    base, extra = divmod(segments, tiles)
    return [base + (index < extra) for index in range(tiles)]


def _check_seams(bounds: Sequence[int], temporal: int) -> None:
    for low, high in pairwise(bounds):
        span = high - low
        if span <= 0:
            raise ValueError(f"DFR seams must increase strictly (got {list(bounds[1:])})")
        if span % temporal:
            raise ValueError(f"a DFR segment of {span} frames is not a multiple of {temporal}")
        if span < 2 * temporal:
            raise ValueError(f"a DFR segment of {span} frames is under 2 latent frames: too short for a tile lead-in")


def _tile(bounds: Sequence[int], own_lo: int, own_hi: int, lead: int, temporal: int) -> Tile:
    """The window owning segments [own_lo, own_hi), reaching `lead` segments back."""
    window_lo = max(0, own_lo - lead)
    start, end = bounds[window_lo], bounds[own_hi]
    latent_start = latent_index(start, temporal)
    # The previous tile keeps the seam's latent frame: drop the lead-in and that frame.
    drop = latent_index(bounds[own_lo], temporal) - latent_start + (own_lo > 0)
    return Tile(pixel_start=start, pixel_end=end, latent_start=latent_start,
                latent_stop=latent_index(end, temporal) + 1,
                anchors=tuple(b for b in bounds[window_lo:own_hi + 1] if b),
                slots=tuple((bounds[i] + bounds[i + 1]) // 2 for i in range(window_lo, own_hi)),
                drop=drop)


def tiles(seams: Sequence[int], frames: int, count: int, temporal: int = FRAMES_PER_LATENT,
          lead: int = LEAD_SEGMENTS) -> list[Tile]:
    """`count` tiles (at most one per segment) over a canvas of `frames` pixel frames whose keyframe seams are
    `seams` (increasing, the last one the last frame)."""
    if frames < 2:
        raise ValueError(f"a DFR canvas needs at least 2 frames (got {frames})")
    if not seams or seams[-1] != frames - 1:
        raise ValueError(f"the last DFR seam must be the canvas's last frame {frames - 1} (got {list(seams)})")
    if lead < 1 or count < 1:
        raise ValueError(f"DFR tiles need a lead-in and a tile count of at least 1 (got {lead}, {count})")
    bounds = [0, *map(int, seams)]
    _check_seams(bounds, temporal)
    segments = len(bounds) - 1
    result, own_lo = [], 0
    for index, run in enumerate(_owned_runs(segments, min(count, segments))):
        result.append(_tile(bounds, own_lo, own_lo + run, lead if index else 0, temporal))
        own_lo += run
    return result


def stitch(latents: Sequence[torch.Tensor], layout: Sequence[Tile]) -> torch.Tensor:
    """The tiles' video latents (B, C, T_tile, H, W) joined along T, each without its first `drop` frames."""
    if not latents or len(latents) != len(layout):
        raise ValueError(f"stitching needs one latent per tile ({len(layout)} tiles, {len(latents)} latents)")
    pieces = []
    for latent, tile in zip(latents, layout, strict=True):
        frames = tile.latent_stop - tile.latent_start
        if latent.ndim != 5 or latent.shape[2] != frames or not 0 <= tile.drop < frames:
            raise ValueError(f"a tile latent of shape {tuple(latent.shape)} does not fit its tile "
                             f"(latent frames [{tile.latent_start}, {tile.latent_stop}), drop {tile.drop})")
        pieces.append(latent[:, :, tile.drop:])
    return torch.cat(pieces, dim=2)


def to_local(frames: Sequence[int], start: int) -> list[int]:
    """Global pixel frames as frames of a tile starting at `start`."""
    return [int(frame) - start for frame in frames]
