"""DFR (ltx-pipelines 1.2.0's `DFRPipeline`): a long clip from a keyframe-slot transformer, spatially detailed, with
optional temporal x2 rounds. Here: the request's settings (`DFR`), the checks a DFR request passes before any model
work, and the rounds' bookkeeping (slot seeds, the keyframes carried to the next round, a tile's images, the output
length, the sound's cut). The chain of stages is `ltx2_core.dfr_pipeline`; its other pieces are `dfr_layout` (canvas,
tiles, stitch), `conditioning.keyframe_slots`, `Stage.ancestral_eta` and the temporal upsampler (`model.upsampler`,
`ModelFiles.temporal_upsampler`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from ltx2_core.conditioning.images import ImageCondition
from ltx2_core.conditioning.keyframe_slots import require_keyframe_embedding
from ltx2_core.dfr_layout import FRAMES_PER_LATENT, Tile, canvas
from ltx2_core.model.transformer.config import TransformerConfig

MAX_ROUNDS = 2  # each round doubles the frame rate; 1.2.0 allows 0, 1 or 2
ANCHOR_STRENGTH = 0.95  # carried keyframes of a temporal round (1.2.0's _ANCHOR_KEYFRAME_STRENGTH)
ROUND_ETA = 0.5  # the rounds' ancestral eta (_TEMPORAL_ANCESTRAL_ETA)
MAX_CONDITIONING_FPS = 60.0  # the rounds' conditioning frame rate cap (_MAX_CONDITIONING_FPS)
ROUND_SEED_STEP = 1000  # a tile's ancestral seed: seed + 1000·round + tile


class DFR(NamedTuple):
    """A DFR request's own settings (`Request.dfr`, mode "dfr"): temporal x2 `rounds` (0, 1 or 2) and the detailing
    IC-LoRA of stage 2 (a file path, or None: stage 2 without it) with its strength."""

    rounds: int = 0
    detailing_lora: str | None = None
    detailing_strength: float = 1.0


def check_dfr(frames: int, rounds: int, transformer: TransformerConfig, transformer_label: str,
              temporal_upsampler: str | None) -> tuple[int, int, list[int]]:
    """The canvas (padded frames, segment, slot frames) of a DFR request, or ValueError naming the fix: rounds
    outside 0..2, rounds without the temporal upsampler file, a transformer without the keyframe embedding, a frame
    count that is not 8k+1 (k >= 1). Headers only: called before any model loads."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 0 <= rounds <= MAX_ROUNDS:
        raise ValueError(f"DFR's temporal rounds must be 0, 1 or 2 (each doubles the frame rate), got {rounds!r}")
    if rounds and temporal_upsampler is None:
        raise ValueError(f"{rounds} temporal round(s) need the temporal x2 latent upsampler: give it with "
                         "--temporal-upsampler (or put it in the models folder's latent_upscale_models), or run 0 "
                         "rounds")
    require_keyframe_embedding(transformer, transformer_label)
    return canvas(frames)


def slot_seeds(video: torch.Tensor, frames: Sequence[int], temporal: int = FRAMES_PER_LATENT) -> torch.Tensor:
    """(B, C, K, H', W'): each slot at pixel frame f seeded with the video latent's frame round(f / 8), clamped to
    the clip (Python's round, halves to even, as the reference's `_slot_initials_from_video`)."""
    last = video.shape[2] - 1
    index = [min(max(round(int(frame) / temporal), 0), last) for frame in frames]
    return video[:, :, index]


def carried_keyframes(anchor_frames: Sequence[int], anchors: torch.Tensor | None, slot_frames: Sequence[int],
                      slots: torch.Tensor | None) -> tuple[list[int], torch.Tensor]:
    """The next round's keyframes: the carried ones and this round's slots (a slot wins at a shared frame), sorted
    by frame; latents (B, C, K, H', W'), frames on this round's grid (the caller doubles them for the next)."""
    by_frame: dict[int, torch.Tensor] = {}
    for frames, latents, what in ((anchor_frames, anchors, "carried keyframes"), (slot_frames, slots, "slots")):
        if not frames:
            continue
        if latents is None or latents.shape[2] != len(frames):
            raise ValueError(f"{what}: {len(frames)} frames but latents of shape "
                             f"{None if latents is None else tuple(latents.shape)}")
        by_frame.update({int(frame): latents[:, :, i:i + 1] for i, frame in enumerate(frames)})
    if not by_frame:
        raise ValueError("a temporal round has no keyframes to carry")
    order = sorted(by_frame)
    return order, torch.cat([by_frame[frame] for frame in order], dim=2)


def first_slots(frames: Sequence[int], latents: torch.Tensor) -> tuple[list[int], torch.Tensor]:
    """The slots of a round's tiles without repeats: a lead-in segment repeats the previous tile's slots, and the
    earlier tile's version wins; sorted by frame."""
    first: dict[int, int] = {}
    for index, frame in enumerate(frames):
        first.setdefault(int(frame), index)
    order = sorted(first)
    return order, latents[:, :, [first[frame] for frame in order]]


def tile_images(images: Sequence[ImageCondition], tile: Tile) -> list[ImageCondition]:
    """The images a round's tile holds, at tile-local frames: every image on the first tile (as the reference), on
    the others those inside the tile's frames, re-indexed from its first frame."""
    if tile.pixel_start == 0:
        return list(images)
    return [image._replace(frame=image.frame - tile.pixel_start) for image in images
            if tile.pixel_start <= image.frame <= tile.pixel_end]


def output_frames(requested: int, rounds: int) -> int:
    """The frames a DFR run returns: (requested - 1)·2^rounds + 1 (the canvas's padding trimmed off)."""
    return (requested - 1) * 2 ** rounds + 1


def sound_samples(samples: int, frames: int, fps: float, rate: int) -> int:
    """The decoded sound's length cut to the video's duration (frames / fps seconds), never longer than it is."""
    return min(samples, round(frames / fps * rate))
