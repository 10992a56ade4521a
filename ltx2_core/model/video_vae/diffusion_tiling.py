"""Decoding with the LTX-2.5 diffusion decoder, whole or in spatial tiles (the reference's scheme).

Stages 1-3 run once on the whole (floor-padded) latent; stages 4-5 run per tile of the stage-4 input grid, each
tile in isolation (its attention windows and RoPE positions local to it), and the tiles' pixels are blended with
separable trapezoidal weights. The starting noise is drawn once for the whole video and each tile takes its slice,
so overlapping tiles denoise the same pixels. Overlaps must cover the attention halo of stages 4-5; a smaller
overlap is raised to that minimum. Time is never split (the whole clip goes through each tile).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import torch

from ltx2_core.model.video_vae.decoder import check_latent
from ltx2_core.model.video_vae.diffusion_config import DiffusionDecoderConfig
from ltx2_core.model.video_vae.diffusion_geometry import resize_axis, trapezoid


class SpatialTiling(Protocol):
    """The spatial half of `tiling.TilingConfig`: tile and overlap in pixels, `spatial_tile` None for no tiling."""

    spatial_tile: int | None
    spatial_overlap: int


class StagedDecoder(Protocol):
    """What tiling needs of `DiffusionVideoDecoder`: its stages, callable one by one."""

    config: DiffusionDecoderConfig

    def pixel_shape(self, latent_shape: tuple[int, ...]) -> tuple[int, int, int, int, int]: ...

    def draw_noise(self, latent: torch.Tensor, generator: torch.Generator | None,
                   noise: torch.Tensor | None) -> torch.Tensor: ...

    def pad_latent(self, latent: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int]]: ...

    def stages_1_to_3(self, latent: torch.Tensor) -> torch.Tensor: ...

    def context(self, feature: torch.Tensor, is_origin: bool, trailing: bool) -> torch.Tensor: ...

    def denoise(self, context: torch.Tensor, x_t: torch.Tensor) -> torch.Tensor: ...


class Span(NamedTuple):
    """One tile along a spatial axis: stage-4 cells [start, end) and the blend ramps, in stage-4 cells."""

    start: int
    end: int
    left: int
    right: int


class TiledDecode(NamedTuple):
    """What every tile of one decode reads: the starting noise, the stage-4 input, the tiles in blend order (rows,
    then columns) and the geometry that maps stage-4 cells to pixels and crops the result."""

    x_init: torch.Tensor
    feature: torch.Tensor
    tiles: list[tuple[Span, Span]]
    scale: tuple[int, int]
    stage5_frames: int
    crop: tuple[int, int, int, int, int]  # frames, top, height, left, width of the video in the padded pixels


def decode_tiles(decoder: StagedDecoder, latent: torch.Tensor, tiling: SpatialTiling | None, *,
                 generator: torch.Generator | None = None, noise: torch.Tensor | None = None) -> torch.Tensor:
    """Normalised latent (B, 128, F', H', W') -> video (B, 3, 8(F'−1)+1, 32·H', 32·W') in [−1, 1], the latent's
    dtype; `tiling` None (or without a spatial tile) decodes stages 4-5 in one piece."""
    plan = plan_tiles(decoder, latent, tiling, generator=generator, noise=noise)
    if len(plan.tiles) == 1:
        return crop_video(plan, decode_tile(decoder, plan, plan.tiles[0]), latent.dtype)
    out, weights = blank_pixels(plan)
    for tile in plan.tiles:
        pixels, mask = decode_tile(decoder, plan, tile), tile_mask(plan, tile)
        h_px, w_px = pixel_slices(plan, tile)
        out[:, :, :, h_px, w_px] += pixels * mask
        weights[h_px, w_px] += mask
    return finish(plan, out, weights, latent.dtype)


def plan_tiles(decoder: StagedDecoder, latent: torch.Tensor, tiling: SpatialTiling | None, *,
               generator: torch.Generator | None = None, noise: torch.Tensor | None = None) -> TiledDecode:
    """Draws the noise, runs stages 1-3 on the whole latent and cuts the stage-4 input into tiles."""
    config = decoder.config
    check_latent(latent, config.latent_channels)
    frames, height, width = decoder.pixel_shape(tuple(latent.shape))[2:]
    x_init = decoder.draw_noise(latent, generator, noise)
    padded, (top, left) = decoder.pad_latent(latent)
    feature = decoder.stages_1_to_3(padded)
    (st, sh, sw), _ = config.upsamples[3]
    s4_frames = stage4_frames(decoder, padded.shape[2])
    rows, cols = (spatial_spans(decoder, feature.shape[axis], tiling, axis - 1) for axis in (2, 3))
    stage5_frames = max(s4_frames * st - (1 if st == 2 else 0), config.stage5_kernel[0])
    crop = (frames, top * config.space_scale, height, left * config.space_scale, width)
    return TiledDecode(x_init, feature, [(row, col) for row in rows for col in cols],
                       (sh * config.patch_size, sw * config.patch_size), stage5_frames, crop)


def pixel_slices(plan: TiledDecode, tile: tuple[Span, Span]) -> tuple[slice, slice]:
    """The (height, width) pixel slices of a tile in the padded video."""
    (row, col), scale = tile, plan.scale
    return slice(row.start * scale[0], row.end * scale[0]), slice(col.start * scale[1], col.end * scale[1])


def decode_tile(decoder: StagedDecoder, plan: TiledDecode, tile: tuple[Span, Span]) -> torch.Tensor:
    """Stages 4-5 of one tile: its pixels (B, 3, F, h, w) in the feature's dtype, not yet weighted."""
    h_px, w_px = pixel_slices(plan, tile)
    row, col = tile
    x_t = resize_axis(plan.x_init[:, :, :, h_px, w_px], 2, plan.stage5_frames, symmetric=False)[0]
    context = decoder.context(plan.feature[:, :, row.start:row.end, col.start:col.end], True, True)
    return decoder.denoise(context, x_t)[:, :, :plan.x_init.shape[2]]


def tile_mask(plan: TiledDecode, tile: tuple[Span, Span]) -> torch.Tensor:
    """The tile's (h, w) blend weights in the feature's dtype and device (separable trapezoids)."""
    (row, col), scale = tile, plan.scale
    h, w = (s.end - s.start for s in tile)
    mask = (trapezoid(h * scale[0], row.left * scale[0], row.right * scale[0])[:, None]
            * trapezoid(w * scale[1], col.left * scale[1], col.right * scale[1])[None, :])
    return mask.to(plan.feature)


def blank_pixels(plan: TiledDecode) -> tuple[torch.Tensor, torch.Tensor]:
    """The zero padded video and the zero (H, W) weight sum the weighted tiles are added into."""
    out = torch.zeros(plan.x_init.shape, dtype=plan.feature.dtype, device=plan.feature.device)
    return out, torch.zeros(plan.x_init.shape[3:], dtype=plan.feature.dtype, device=plan.feature.device)


def finish(plan: TiledDecode, out: torch.Tensor, weights: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The blended tiles divided by their weight sum, cropped to the video, in `dtype`."""
    return crop_video(plan, out.div_(weights), dtype)


def crop_video(plan: TiledDecode, pixels: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The padded pixels cropped to the video (padding and trailing frames off), in `dtype`."""
    frames, top, height, left, width = plan.crop
    return pixels[:, :, :frames, top:top + height, left:left + width].to(dtype)


def stage4_frames(decoder: StagedDecoder, latent_frames: int) -> int:
    """Frames of the stage-4 input for a latent of `latent_frames` (before the trailing replication)."""
    for (st, _, _), _ in decoder.config.upsamples[:3]:
        latent_frames = latent_frames * st - (1 if st == 2 else 0)
    return latent_frames


def minimum_overlap(decoder: StagedDecoder) -> int:
    """Smallest spatial overlap in pixels that covers the attention halo of stages 4 and 5 (a multiple of 32)."""
    config = decoder.config
    stride = config.upsamples[3][0]
    halo = 0
    for axis in (1, 2):
        halo4 = config.stage_depths[3] * (config.stage_kernels[3][axis] // 2)
        halo5 = -(-(config.stage_depths[-1] * (config.stage5_kernel[axis] // 2)) // stride[axis])
        halo = max(halo, halo4, halo5)
    pixels = halo * stride[1] * config.patch_size
    return -(-pixels // 32) * 32


def spatial_spans(decoder: StagedDecoder, length: int, tiling: SpatialTiling | None, axis: int) -> list[Span]:
    """Tiles along stage-4 axis `axis` (1 height, 2 width) of `length` cells: the reference's split by size,
    a short last tile grown leftwards to the minimum tile size."""
    if tiling is None or tiling.spatial_tile is None:
        return [Span(0, length, 0, 0)]
    config = decoder.config
    stride = config.upsamples[3][0][axis]
    scale = stride * config.patch_size
    overlap = max(tiling.spatial_overlap, minimum_overlap(decoder)) // scale
    size = max(2, overlap + 1, tiling.spatial_tile // scale)
    floor = max(config.stage_kernels[3][axis], -(-config.stage5_kernel[axis] // stride))
    if length < floor or length <= size:
        return [Span(0, length, 0, 0)]
    count = (length + size - 2 * overlap - 1) // (size - overlap)
    spans = [Span(i * (size - overlap), i * (size - overlap) + size, overlap if i else 0, overlap)
             for i in range(count - 1)]
    spans.append(Span((count - 1) * (size - overlap), length, overlap, 0))
    last, previous = spans[-1], spans[-2]
    if last.end - last.start < floor:
        start = last.end - floor
        spans[-2:] = [previous._replace(right=previous.end - start), Span(start, last.end, previous.end - start, 0)]
    return spans
