"""Generated keyframe slots (DFR, ltx-core 1.2.0's `VideoGeneratedKeyframeSlots`): one latent frame of tokens per
slot appended after the video's own, each at a single pixel frame in time ([f, f + 1) / fps, the grid's positions in
space), generated (denoise mask 1) rather than held, and marked for the transformer's keyframe embedding
(`ConditionedStream.marked`), as the causal VAE's first latent frame is: both stand for one pixel frame.

A slot starts from zeros, or from `initial` content (an upsampled earlier stage's slots, the nearest video latent of a
temporal round), which the noising blends with the noise (`ConditionedStream.initial`); its clean value is zeros and
plays no part (mask 1). After the last step the sampler returns the slots' denoised content as `AVLatent.keyframes`
(B, 128, K, H', W') instead of dropping it with the guiding tokens. Only a transformer trained with the keyframe
embedding (`use_keyframes_abs_pos_embedding`) knows what a slot is.

`CarriedKeyframes` are the other side of a temporal round: keyframes already generated (an earlier stage's slots),
appended as given content at single pixel frames with a strength (ltx-core's `VideoConditionByKeyframeIndex` built
from latents), unmarked; unlike an image condition, one at frame 0 is appended too rather than replacing the first
latent frame (a tile's opening seam).
"""

from __future__ import annotations

import dataclasses
from itertools import pairwise
from typing import ClassVar, NamedTuple

import torch

from ltx2_core.conditioning.images import keyframe_positions
from ltx2_core.conditioning.stream import VIDEO, ConditionedStream, Modality
from ltx2_core.geometry import VIDEO_TIME_SCALE, patchify_video
from ltx2_core.model.transformer.config import TransformerConfig


def require_keyframe_embedding(config: TransformerConfig, transformer: str) -> None:
    """ValueError naming the fix unless the transformer (`config`, read from the file `transformer` names) was
    trained for generated keyframe slots (`use_keyframes_abs_pos_embedding`, ltx-pipelines 1.2.0's check): on any
    other, slots would cost a latent frame of tokens each and be denoised as unmarked tokens."""
    if not config.keyframe_embedding:
        raise ValueError(f"generated keyframe slots (DFR) were requested, but the transformer {transformer} does not "
                         "set 'use_keyframes_abs_pos_embedding' in its config, so it has no keyframe embedding; use "
                         "a transformer trained for generated keyframes, or run another mode")


@dataclasses.dataclass(frozen=True, eq=False)  # identity equality: comparing tensors has no single truth value
class KeyframeSlots:
    """Slots at pixel frames `frames` (non-empty, strictly increasing, within the clip), optionally seeded with
    `initial` (1, 128, K, H', W') latent content, K = len(frames)."""

    frames: tuple[int, ...]
    initial: torch.Tensor | None = None
    modality: ClassVar[Modality] = VIDEO

    def __post_init__(self) -> None:
        frames = tuple(int(frame) for frame in self.frames)
        object.__setattr__(self, "frames", frames)
        if not frames or frames[0] < 0 or any(b <= a for a, b in pairwise(frames)):
            raise ValueError(f"keyframe slots need pixel frames that are non-negative and strictly increasing, "
                             f"got {list(frames)}")
        if self.initial is not None and (self.initial.dim() != 5 or self.initial.shape[:3] != (1, 128, len(frames))):
            raise ValueError(f"keyframe slot content must be a latent (1, 128, {len(frames)}, H', W'), one frame per "
                             f"slot; got {tuple(self.initial.shape)}")

    def apply(self, stream: ConditionedStream) -> ConditionedStream:
        if stream.grid is None:
            raise ValueError("keyframe slots need the video's latent grid (condition_video's `grid`)")
        if stream.slots is not None:
            raise ValueError("keyframe slots were already appended to this stream; give all slots in one condition")
        frames, rows, cols = stream.grid
        pixel_frames = (frames - 1) * VIDEO_TIME_SCALE + 1
        if self.frames[-1] >= pixel_frames:
            raise ValueError(f"a keyframe slot at pixel frame {self.frames[-1]} lies outside the clip's "
                             f"{pixel_frames} frames")
        if self.initial is not None and self.initial.shape[3:] != (rows, cols):
            raise ValueError(f"keyframe slot content of {tuple(self.initial.shape[3:])} latent rows and columns does "
                             f"not match the video's {(rows, cols)}")
        device, dtype = stream.clean.device, stream.clean.dtype
        count = len(self.frames) * rows * cols
        positions = torch.cat([keyframe_positions(frame, rows, cols, stream.fps, device, span=1)
                               for frame in self.frames], dim=2)
        start = None if self.initial is None else patchify_video(self.initial.to(device=device, dtype=dtype))
        clean = torch.zeros(1, count, stream.clean.shape[2], device=device, dtype=dtype)
        first = stream.clean.shape[1]
        appended = stream.append(clean, torch.ones(1, count, 1, device=device), positions, marked=True, start=start)
        return appended._replace(slots=(first, len(self.frames)))


class CarriedKeyframes(NamedTuple):
    """Keyframe latents (1, 128, K, H', W') held at pixel frames `frames` (K of them) with `strength`, each appended
    as one pixel frame's tokens ([f, f + 1) / fps), frame 0 included; not marked for the keyframe embedding."""

    latents: torch.Tensor
    frames: tuple[int, ...]
    strength: float
    modality = VIDEO

    def apply(self, stream: ConditionedStream) -> ConditionedStream:
        if self.latents.dim() != 5 or self.latents.shape[2] != len(self.frames):
            raise ValueError(f"carried keyframes need one latent frame per frame ({len(self.frames)}), got "
                             f"{tuple(self.latents.shape)}")
        rows, cols = self.latents.shape[3:]
        device, dtype = stream.clean.device, stream.clean.dtype
        for index, frame in enumerate(self.frames):
            tokens = patchify_video(self.latents[:, :, index:index + 1].to(device=device, dtype=dtype))
            # the reference builds the mask in the latent's dtype (bf16 in real runs)
            mask = torch.full((1, tokens.shape[1], 1), 1.0 - self.strength, dtype=dtype, device=device).float()
            stream = stream.append(tokens, mask, keyframe_positions(int(frame), rows, cols, stream.fps, device, span=1))
        return stream
