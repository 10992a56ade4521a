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


def decode_tiles(decoder: StagedDecoder, latent: torch.Tensor, tiling: SpatialTiling | None, *,
                 generator: torch.Generator | None = None, noise: torch.Tensor | None = None) -> torch.Tensor:
    """Normalised latent (B, 128, F', H', W') -> video (B, 3, 8(F'−1)+1, 32·H', 32·W') in [−1, 1], the latent's
    dtype; `tiling` None (or without a spatial tile) decodes stages 4-5 in one piece."""
    config = decoder.config
    check_latent(latent, config.latent_channels)
    frames, height, width = decoder.pixel_shape(tuple(latent.shape))[2:]
    x_init = decoder.draw_noise(latent, generator, noise)
    padded, (top, left) = decoder.pad_latent(latent)
    feature = decoder.stages_1_to_3(padded)
    (st, sh, sw), _ = config.upsamples[3]
    scale = (sh * config.patch_size, sw * config.patch_size)
    s4_frames = stage4_frames(decoder, padded.shape[2])
    rows, cols = (spatial_spans(decoder, feature.shape[axis], tiling, axis - 1) for axis in (2, 3))
    full = len(rows) == len(cols) == 1
    out = torch.zeros(x_init.shape, dtype=feature.dtype, device=feature.device)
    weights = None if full else torch.zeros(x_init.shape[3:], dtype=feature.dtype, device=feature.device)
    stage5_frames = max(s4_frames * st - (1 if st == 2 else 0), config.stage5_kernel[0])
    for row in rows:
        for col in cols:
            h_px = slice(row.start * scale[0], row.end * scale[0])
            w_px = slice(col.start * scale[1], col.end * scale[1])
            x_t = resize_axis(x_init[:, :, :, h_px, w_px], 2, stage5_frames, symmetric=False)[0]
            context = decoder.context(feature[:, :, row.start:row.end, col.start:col.end], True, True)
            pixels = decoder.denoise(context, x_t)[:, :, :x_init.shape[2]]
            if full:
                out.copy_(pixels)
                continue
            mask = (trapezoid(pixels.shape[3], row.left * scale[0], row.right * scale[0])[:, None]
                    * trapezoid(pixels.shape[4], col.left * scale[1], col.right * scale[1])[None, :]).to(out)
            out[:, :, :, h_px, w_px] += pixels * mask
            weights[h_px, w_px] += mask
    if weights is not None:
        out /= weights
    top, left = top * config.space_scale, left * config.space_scale
    return out[:, :, :frames, top:top + height, left:left + width].to(latent.dtype)


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
