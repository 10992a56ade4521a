"""Tiled video decoding with bounded memory (spec §3, "Tiling").

The latent is cut into a grid of overlapping tiles (spatial tiles × temporal chunks), each tile is decoded on its
own and blended into the output with separable trapezoidal weights. Tile geometry and blend ramps are the
reference's (`VideoDecoder.tiled_decode`), so both give the same video; the differences are in how it is done:
* the weights of each axis are normalised to sum to 1 before blending, so there is no full-size weight buffer and
  no final division pass over the video;
* decode noise (timestep-conditioned VAEs) is drawn once for the whole latent, so overlapping tiles agree;
* the output may live on another device (e.g. the CPU) than the decoder: the accelerator then holds one tile.
Peak accelerator memory is set by the tile size, not the video length or size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ltx2_core.geometry import VIDEO_SPACE_SCALE as SCALE_SPACE, VIDEO_TIME_SCALE as SCALE_TIME
from ltx2_core.model.video_vae.decoder import VideoDecoder
from ltx2_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder

MIN_SPATIAL_TILE, MIN_TEMPORAL_TILE = 64, 16


@dataclass(frozen=True)
class TilingConfig:
    """Tile sizes and overlaps in pixels / frames; `None` turns tiling off along that axis group.

    The defaults (512 px tiles, 64 px overlap; 64-frame chunks, 24 frames overlap) are the reference pipelines'
    and keep a 2.0/2.3 decode of any length under a few GB of activations in bf16. Smaller tiles lower the
    peak further at some extra compute (the overlaps are decoded twice).
    """

    spatial_tile: int | None = 512
    spatial_overlap: int = 64
    temporal_tile: int | None = 64
    temporal_overlap: int = 24

    def __post_init__(self) -> None:
        problems = []
        if self.spatial_tile is not None:
            problems += _check("spatial", self.spatial_tile, self.spatial_overlap, MIN_SPATIAL_TILE, SCALE_SPACE, "px")
        if self.temporal_tile is not None:
            problems += _check("temporal", self.temporal_tile, self.temporal_overlap, MIN_TEMPORAL_TILE, SCALE_TIME,
                               "frames")
        if problems:
            raise ValueError("invalid tiling: " + "; ".join(problems))

    @classmethod
    def off(cls) -> TilingConfig:
        return cls(spatial_tile=None, spatial_overlap=0, temporal_tile=None, temporal_overlap=0)


def _check(name: str, tile: int, overlap: int, minimum: int, multiple: int, unit: str) -> list[str]:
    if tile < minimum or tile % multiple or overlap % multiple or not 0 <= overlap < tile:
        return [f"{name} tile {tile} {unit} with overlap {overlap} {unit}: the tile must be ≥ {minimum} and both "
                f"multiples of {multiple}, with 0 ≤ overlap < tile"]
    return []


@dataclass(frozen=True)
class AxisTiles:
    """Tiles along one axis: latent input slices, output slices and normalised 1-D blend weights (output units)."""

    latent: tuple[slice, ...]
    output: tuple[slice, ...]
    weights: tuple[torch.Tensor, ...]


def decode_video(
    latent: torch.Tensor,
    decoder: VideoDecoder | DiffusionVideoDecoder,
    tiling: TilingConfig | None = TilingConfig(),
    *,
    generator: torch.Generator | None = None,
    timestep: torch.Tensor | None = None,
    output_device: torch.device | str | None = None,
) -> torch.Tensor:
    """Normalised latent (B, 128, F', H', W') -> fp32 video (B, 3, 8(F'−1)+1, 32·H', 32·W') in [−1, 1].

    Tiled by default; `tiling=None` (or `TilingConfig.off()`) decodes in one piece. The output is allocated on
    `output_device` (default: the latent's device). The LTX-2.5 diffusion decoder tiles itself (stages 4-5, in
    space only) and draws its starting noise from `generator`; `timestep` does not apply to it.
    """
    if isinstance(decoder, DiffusionVideoDecoder):
        return decoder(latent, generator, tiling=tiling).float().to(output_device or latent.device)
    z = decoder.prepare(latent, generator)
    axes = tile_axes(tuple(z.shape[2:]), tiling or TilingConfig.off())
    if all(len(axis.latent) == 1 for axis in axes):  # one tile: no blend buffer, no second copy of the video
        return decoder.decode_prepared(z, timestep, torch.float32).to(output_device or z.device)
    out = blank_video(decoder, z, axes, output_device or z.device)
    for tile in video_tiles(axes):
        out[(slice(None), slice(None), *tile.output)] += decode_tile(decoder, z, tile, timestep).to(out.device)
    return out


@dataclass(frozen=True)
class VideoTile:
    """One tile of the grid: its latent slices and output slices (time, height, width) and 1-D blend weights."""

    latent: tuple[slice, slice, slice]
    output: tuple[slice, slice, slice]
    weights: tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def video_tiles(axes: tuple[AxisTiles, AxisTiles, AxisTiles]) -> list[VideoTile]:
    """The tiles of `tile_axes` in blend order: time outermost, then rows, then columns (the order in which
    `decode_video` adds them up, which other tiled decodes keep to give the same sums)."""
    time, rows, cols = axes
    return [VideoTile((t_in, h_in, w_in), (t_out, h_out, w_out), (t_w, h_w, w_w))
            for t_in, t_out, t_w in zip(time.latent, time.output, time.weights)
            for h_in, h_out, h_w in zip(rows.latent, rows.output, rows.weights)
            for w_in, w_out, w_w in zip(cols.latent, cols.output, cols.weights)]


def blank_video(decoder: VideoDecoder, z: torch.Tensor, axes: tuple[AxisTiles, AxisTiles, AxisTiles],
                device: torch.device | str) -> torch.Tensor:
    """The zero fp32 video (B, C, F, H, W) the weighted tiles of a prepared latent `z` are added into."""
    frames, height, width = (axis.output[-1].stop for axis in axes)
    return torch.zeros(z.shape[0], decoder.config.out_channels, frames, height, width, dtype=torch.float32,
                       device=device)


def decode_tile(decoder: VideoDecoder, z: torch.Tensor, tile: VideoTile,
                timestep: torch.Tensor | None = None) -> torch.Tensor:
    """One tile of the prepared latent `z` decoded and multiplied by its blend weights: fp32 on the decoder's
    device, shaped as the tile's output slices."""
    t_in, h_in, w_in = tile.latent
    pixels = decoder.decode_prepared(z[:, :, t_in, h_in, w_in], timestep, torch.float32)
    t_w, h_w, w_w = (weight.to(pixels.device) for weight in tile.weights)
    return pixels.mul_(t_w[:, None, None]).mul_(h_w[:, None]).mul_(w_w)


def tile_axes(latent_size: tuple[int, int, int], tiling: TilingConfig) -> tuple[AxisTiles, AxisTiles, AxisTiles]:
    """Per-axis tile axes (time, height, width) for a latent of (F', H', W')."""
    frames, height, width = latent_size
    if tiling.temporal_tile is None:
        time = _single(frames, SCALE_TIME, temporal=True)
    else:
        time = _temporal(frames, tiling.temporal_tile // SCALE_TIME, tiling.temporal_overlap // SCALE_TIME)
    if tiling.spatial_tile is None:
        return time, _single(height, SCALE_SPACE), _single(width, SCALE_SPACE)
    tile, overlap = tiling.spatial_tile // SCALE_SPACE, tiling.spatial_overlap // SCALE_SPACE
    long_side = max(height, width)
    # the reference shrinks the tile of the shorter side in proportion, keeping tiles about as square as the video
    sizes = [max(2, overlap + 1, round(tile * n / long_side)) for n in (height, width)]
    return time, _spatial(height, sizes[0], overlap), _spatial(width, sizes[1], overlap)


def _intervals(length: int, size: int, overlap: int) -> list[tuple[int, int, int, int]]:
    """(start, end, left ramp, right ramp) of overlapping intervals covering [0, length)."""
    if length <= size:
        return [(0, length, 0, 0)]
    count = (length + size - 2 * overlap - 1) // (size - overlap)
    starts = [i * (size - overlap) for i in range(count)]
    ends = [s + size for s in starts[:-1]] + [length]
    return [(s, e, overlap if i else 0, overlap if i < count - 1 else 0) for i, (s, e) in enumerate(zip(starts, ends))]


def _spatial(length: int, size: int, overlap: int) -> AxisTiles:
    tiles = _intervals(length, size, overlap)
    ramps = [_trapezoid((e - s) * SCALE_SPACE, left * SCALE_SPACE, right * SCALE_SPACE, from_zero=False)
             for s, e, left, right in tiles]
    outputs = [slice(s * SCALE_SPACE, e * SCALE_SPACE) for s, e, _, _ in tiles]
    return _normalised([slice(s, e) for s, e, _, _ in tiles], outputs, ramps, length * SCALE_SPACE)


def _temporal(length: int, size: int, overlap: int) -> AxisTiles:
    """Chunks after the first start one latent earlier (the decoder's first latent frame yields one pixel frame)
    with a ramp one latent longer that starts from 0, as in the reference."""
    tiles = _intervals(length, size, overlap)
    tiles = [(s - 1, e, left + 1, right) if i else (s, e, left, right) for i, (s, e, left, right) in enumerate(tiles)]
    outputs, ramps = [], []
    for s, e, left, right in tiles:
        outputs.append(slice(s * SCALE_TIME, 1 + (e - 1) * SCALE_TIME))
        left_frames = 0 if left == 0 else 1 + (left - 1) * SCALE_TIME
        ramps.append(_trapezoid(1 + (e - s - 1) * SCALE_TIME, left_frames, right * SCALE_TIME, from_zero=True))
    return _normalised([slice(s, e) for s, e, _, _ in tiles], outputs, ramps, 1 + (length - 1) * SCALE_TIME)


def _single(length: int, scale: int, temporal: bool = False) -> AxisTiles:
    size = 1 + (length - 1) * scale if temporal else length * scale
    return AxisTiles((slice(0, length),), (slice(0, size),), (torch.ones(size),))


def _normalised(latent: list[slice], outputs: list[slice], ramps: list[list[float]], size: int) -> AxisTiles:
    """Divides each ramp by the sum of all ramps at its positions, so the blend weights sum to 1 everywhere.

    Plain Python numbers: the tiles are a handful of short vectors, built before any tensor work (and under
    fake-tensor memory estimation too).
    """
    total = [0.0] * size
    for out, ramp in zip(outputs, ramps):
        for i, value in zip(range(out.start, out.stop), ramp):
            total[i] += value
    if min(total) <= 0:
        raise RuntimeError(f"the tiles leave output positions without weight: {outputs}")
    weights = [torch.tensor([v / total[i] for i, v in zip(range(out.start, out.stop), ramp)])
               for out, ramp in zip(outputs, ramps)]
    return AxisTiles(tuple(latent), tuple(outputs), tuple(weights))


def _trapezoid(length: int, left: int, right: int, from_zero: bool) -> list[float]:
    """Linear fade-in over `left` and fade-out over `right` samples (the reference's trapezoidal mask)."""
    mask = [1.0] * length
    left, right = min(left, length), min(right, length)
    if left:
        steps = left + 1 if from_zero else left + 2  # linspace(0, 1, steps) without its last (and first) value
        fade = [i / (steps - 1) for i in range(steps - 1)]
        for i, value in enumerate(fade if from_zero else fade[1:]):
            mask[i] *= value
    for i in range(right):
        mask[length - right + i] *= 1.0 - (i + 1) / (right + 1)
    return mask
