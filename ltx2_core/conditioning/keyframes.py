"""Images as keyframes, as ltx-pipelines' keyframe interpolation conditions on them (`KeyframeInterpolationPipeline`,
1.0.0 and 1.2.0: `image_conditionings_by_adding_guiding_latent`, one ltx-core `VideoConditionByKeyframeIndex` per
image, frame 0 included).

Unlike an image of image-to-video (`ltx2_core.conditioning.images.EncodedImage`), a keyframe never replaces the
latent's own tokens: at every frame, frame 0 too, its tokens are appended after the video tokens (clean value the
image, denoise mask 1 − strength in the image's dtype, full attention both ways) and dropped after the last step, so
the clip's first latent frame is generated freely. Time bounds: a keyframe at frame 0 spans [0, 1) / fps in both
references (the VAE's causal fix: its latent frame's [0, 8) pixel frames shifted by 1 − 8 and clamped at 0); at any
other frame f it spans [f, f + span) / fps, the release's `keyframe_frames` (8, a latent frame's, in 1.0.0: LTX-2.0
and 2.3; 1, the image's one pixel frame, in 1.2.0: LTX-2.5). Several keyframes at one frame are all appended, in
order (none replaces another). How appended tokens start where a stage begins below noise scale 1 is the release's
(`Release.noise_from_latent`: 1.0.0 from their clean values, 1.2.0 from zeros)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from ltx2_core.conditioning.images import DEFAULT_IMAGE_CRF, EncodedImage, ImageCondition, encode_conditions, \
    keyframe_positions
from ltx2_core.conditioning.stream import VIDEO, ConditionedStream
from ltx2_core.geometry import patchify_video, video_tokens

FIRST_FRAME_SPAN = 1  # pixel frames a frame-0 keyframe spans in both references (the causal fix)


class EncodedKeyframe(NamedTuple):
    """An encoded image appended as keyframe tokens at a pixel frame (a `Condition` of the video): latent
    (1, 128, 1, H/32, W/32), its pixel frame and strength (module docstring)."""

    latent: torch.Tensor
    frame: int
    strength: float
    modality = VIDEO

    def apply(self, stream: ConditionedStream) -> ConditionedStream:
        image = patchify_video(self.latent.to(device=stream.clean.device, dtype=stream.clean.dtype))
        rows, cols = self.latent.shape[3:]
        # the reference builds the mask in the latent's dtype (bf16 in real runs)
        mask = torch.full((1, image.shape[1], 1), 1.0 - self.strength, dtype=image.dtype,
                          device=stream.clean.device).float()
        span = FIRST_FRAME_SPAN if self.frame == 0 else stream.keyframe_frames
        positions = keyframe_positions(self.frame, rows, cols, stream.fps, stream.clean.device, span)
        return stream.append(image, mask, positions)


def encode_images(conditions: Sequence[ImageCondition], encoder: torch.nn.Module, height: int, width: int,
                  crf: int = DEFAULT_IMAGE_CRF, keyframes: bool = False) -> list[EncodedImage | EncodedKeyframe]:
    """Every image encoded at height × width in one batch (`encode_conditions`), each an `EncodedKeyframe` where it
    asks to be one (`ImageCondition.keyframe`) or `keyframes` makes them all (the keyframe interpolation mode),
    else an `EncodedImage`; in the given order."""
    encoded = encode_conditions(conditions, encoder, height, width, crf)
    return [EncodedKeyframe(*image) if keyframes or condition.keyframe else image
            for condition, image in zip(conditions, encoded)]


def appended_image_tokens(images: Sequence[ImageCondition], height: int, width: int, keyframes: bool = False) -> int:
    """Video tokens the images append at a stage of height × width (what the memory plan counts): one latent frame
    each for a keyframe (`keyframes`: every image, frame 0 too) and for an image-to-video image at any frame but 0
    (frame 0 replaces the first latent frame instead)."""
    return sum(video_tokens(1, height, width) for image in images
               if keyframes or image.keyframe or image.frame != 0)
