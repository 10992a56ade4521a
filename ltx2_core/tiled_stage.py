"""A refinement stage run tile by tile (`refine_tiled`): each tile of the video latent (`sampling.tiles`) is
sampled alone as its own clip, from its own slice of the latent and with its own generator (seed + the tile's
index), and the results are blended back with the tiles' ramp weights, as ltx-pipelines 1.2.0's HDR IC-LoRA runs
its stage 2 (`_run_stage2_phase`): less activation memory (a tile's tokens, not the clip's), the same model.

A tile is sampled as a fresh clip of its size: its positions start at 0 (frames of (f − 1)·8 + 1 pixels, rows and
columns of 32), as the reference builds each tile's latent tools from the tile's own shape. The stage's conditions
are cut to the tile (`crop_conditions`): an IC-LoRA reference (`EncodedControl`) keeps its frames of the tile and
its rows and columns divided by its downscale factor; a condition that cannot be cut is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import torch

from ltx2_core.conditioning.control import EncodedControl
from ltx2_core.conditioning.stream import Condition
from ltx2_core.sampling.stage import Stage
from ltx2_core.sampling.tiles import Tile, TileLayout, clamp_layout, tiles
from ltx2_core.stages import AVLatent

# samples one tile: (its latent, its stage, its generator) -> the sampled latent
TileSampler = Callable[[AVLatent, Stage, torch.Generator], AVLatent]


def crop_condition(condition: Condition, tile: Tile) -> Condition:
    """`condition` cut to `tile`; ValueError naming the fix for a kind that cannot be cut."""
    if not isinstance(condition, EncodedControl):
        raise ValueError(f"a tiled stage cuts its conditions to each tile, which a {type(condition).__name__} cannot "
                         "be; refine without tiles, or drop that condition")
    frames, rows, cols = tile.slices
    d = condition.downscale
    small = (frames, slice(rows.start // d, rows.stop // d), slice(cols.start // d, cols.stop // d))
    attention = condition.attention
    if isinstance(attention, torch.Tensor):  # one weight per token of its grid, cut alike
        attention = attention.reshape(condition.latent.shape[2:])[small].flatten()
    return condition._replace(latent=condition.latent[(slice(None), slice(None), *small)], attention=attention)


def crop_conditions(conditions: Sequence[Condition], tile: Tile) -> tuple[Condition, ...]:
    return tuple(crop_condition(condition, tile) for condition in conditions)


def refine_tiled(sample_tile: TileSampler, latent: AVLatent, layout: TileLayout, stage: Stage, seed: int,
                 device: torch.device | str) -> AVLatent:
    """`stage` sampled tile by tile over `latent`'s video (a video-only latent, audio None): tile i from its slice
    of the latent, with the stage's conditions cut to it and a generator on `device` seeded `seed` + i; the results
    blended with the tiles' weights (in the sampled latent's dtype). `layout` is clamped to the latent first."""
    if latent.video is None or latent.audio is not None:
        raise ValueError(f"{stage.name}: a tiled stage refines a video-only latent (audio None)")
    grid = tuple(latent.video.shape[2:])
    blended = None
    for index, tile in enumerate(tiles(clamp_layout(layout, grid), grid)):
        part = latent._replace(video=latent.video[(slice(None), slice(None), *tile.slices)])
        generator = torch.Generator(device).manual_seed(seed + index)
        tile_stage = dataclasses.replace(stage, conditions=crop_conditions(stage.conditions, tile))
        result = sample_tile(part, tile_stage, generator).video
        if blended is None:
            blended = torch.zeros(*result.shape[:2], *grid, dtype=result.dtype, device=result.device)
        blended[(slice(None), slice(None), *tile.slices)] += result * tile.weights.to(result.device, result.dtype)
    return latent._replace(video=blended)
