"""A clip of automatic length (ltx-pipelines 1.2.0's `AutoDuration`): LTX-2.5's duration head predicts the clip's
seconds from the positive prompt's text contexts, once the prompt is encoded and before any noise is drawn (so the
seed's noise is the same as for that frame count given), and the request takes the frame count that makes.

What the head reads, as the reference's pipelines: text to audio the audio contexts alone (`T2AOneStagePipeline`),
the video modes both (`TI2VidOneStagePipeline`, the two-stage and distilled ones). A clip whose length comes from a
file (sound for a video, a retake, an input sound), control videos (the reference's IC-LoRA pipeline takes a frame
count) and a long clip (its length is its duration) are refused with auto, as a model without the head is
(LTX-2.0 / 2.3, or 2.5 files without it), before any model work."""

from __future__ import annotations

import logging
from dataclasses import replace

import torch

from ltx2_core.model.duration_head import DurationHead, clip_frames
from ltx2_core.request import AutoFrames, Request
from ltx2_core.types import TextEmbeddings

log = logging.getLogger(__name__)
NO_HEAD_FIX = ("give the duration head (the command line's --duration-head FILE; in ComfyUI a duration head file in "
               "models/diffusion_models beside the transformer) or a frame count instead of auto")


def check_auto_frames(request: Request, has_head: bool, version: str) -> None:
    """ValueError naming the fix when `request` asks for an automatic length and the model has no head (`version`:
    the model's release, which says why); what else refuses it is `Request.check`'s (`request.auto_problem`)."""
    if request.auto_frames is not None and not has_head:
        raise no_head(version)


def no_head(version: str) -> ValueError:
    """The refusal of an automatic length on a model without the head (`version`: its release, which says why)."""
    why = (f"LTX-{version} has no duration head" if version != "2.5" else
           "the model's files have no duration head (duration_head.* tensors)")
    return ValueError(f"an automatic length (frames auto) needs LTX-2.5's duration head, and {why}: "
                      + ("give a frame count" if version != "2.5" else NO_HEAD_FIX))


@torch.no_grad()
def predict_seconds(head: DurationHead, positive: TextEmbeddings, audio_only: bool) -> float:
    """The head's length in seconds for one prompt's contexts (batch 1): the audio contexts alone for text to
    audio, both otherwise (as the reference's pipelines feed it). One host read: before sampling, not per step."""
    if positive.audio.shape[0] != 1:
        raise ValueError(f"an automatic length is predicted for one prompt, got a batch of {positive.audio.shape[0]}")
    weight = next(head.parameters())
    video = None if audio_only else positive.video.to(weight.device, weight.dtype)
    return head(video, positive.audio.to(weight.device, weight.dtype)).item()


def predict_length(head: DurationHead | None, positive: TextEmbeddings, fps: float, auto: AutoFrames,
                   audio_only: bool, version: str) -> tuple[int, float]:
    """(frames, the head's raw seconds) for one prompt's contexts at `fps` within `auto`'s bounds; ValueError naming
    the fix without a head (`version`: the model's release) or with bad bounds."""
    auto.check()
    if head is None:
        raise no_head(version)
    seconds = predict_seconds(head, positive, audio_only)
    frames = clip_frames(seconds, fps, auto.min_seconds, auto.max_seconds)
    _log_choice(seconds, frames, fps, auto)
    return frames, seconds


def resolve_frames(request: Request, head: DurationHead | None, positive: TextEmbeddings) -> Request:
    """`request` with its frame count predicted when it asks for an automatic length (its images' last frame
    placed at the clip's end, every check run again for the clip chosen); `request` itself otherwise."""
    if request.auto_frames is None:
        return request
    if head is None:
        raise ValueError(f"an automatic length (frames auto) needs LTX-2.5's duration head: {NO_HEAD_FIX}")
    return with_length(request, predict_seconds(head, positive, request.audio_only))


def with_length(request: Request, seconds: float) -> Request:
    """`request` of automatic length with the frame count `seconds` (the head's) makes within its bounds, logged."""
    auto = request.auto_frames
    frames = clip_frames(seconds, request.fps, auto.min_seconds, auto.max_seconds)
    _log_choice(seconds, frames, request.fps, auto)
    resolved = replace(request, frames=frames, auto_frames=None,
                       images=tuple(image.at(frames) for image in request.images))
    resolved.check()
    return resolved


def _log_choice(seconds: float, frames: int, fps: float, auto: AutoFrames) -> None:
    """The head's raw seconds and the frames chosen (a warning where the bounds clamped them)."""
    if not auto.min_seconds <= seconds <= auto.max_seconds:
        log.warning("duration head: %.2f s predicted, outside [%g, %g] s: %d frames (%.2f s) at %g fps", seconds,
                    auto.min_seconds, auto.max_seconds, frames, frames / fps, fps)
    else:
        log.info("duration head: %.2f s predicted: %d frames at %g fps", seconds, frames, fps)
