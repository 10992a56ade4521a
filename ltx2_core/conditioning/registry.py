"""The condition kinds a sampling stage accepts, and applying them to a stream.

A new kind of condition (audio held at times, a control video, a retake mask, ...) is one module with a class that
follows `Condition` (`ltx2_core.conditioning.stream`) plus one line in `CONDITIONS`; `stages.sample` and the
pipeline pass conditions through without knowing their kinds.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ltx2_core.conditioning.audio import EncodedAudio
from ltx2_core.conditioning.audio_reference import EncodedAudioReference
from ltx2_core.conditioning.continuation import Continuation
from ltx2_core.conditioning.control import EncodedControl
from ltx2_core.conditioning.images import EncodedImage
from ltx2_core.conditioning.keyframes import EncodedKeyframe
from ltx2_core.conditioning.keyframe_slots import CarriedKeyframes, KeyframeSlots
from ltx2_core.conditioning.video import EncodedVideo
from ltx2_core.conditioning.stream import AUDIO, VIDEO, Condition, ConditionedStream
from ltx2_core.geometry import VIDEO_TIME_SCALE

CONDITIONS: dict[str, type[Condition]] = {
    "image": EncodedImage,  # an encoded image held at a pixel frame (image-to-video, keyframes)
    "audio": EncodedAudio,  # an encoded sound held over the clip (audio-to-video)
    "video": EncodedVideo,  # an encoded video held over the clip (video-to-audio: sound for a silent video)
    "control": EncodedControl,  # an encoded control video guiding through an IC-LoRA (appended tokens)
    "continuation": Continuation,  # the previous window's last latent frames held in place (long video)
    "audio_reference": EncodedAudioReference,  # a reference sound appended at negative times (Dub-It)
    "keyframe": EncodedKeyframe,  # an encoded image appended at a pixel frame, frame 0 too (keyframe interpolation)
    "keyframe_slots": KeyframeSlots,  # generated single-frame keyframes appended and marked (DFR)
    "carried_keyframes": CarriedKeyframes,  # keyframes generated earlier, appended at single frames (DFR rounds)
}


def condition_kind(condition: Condition) -> str:
    """The registered name of `condition`'s kind; TypeError naming the known kinds for anything else (before any
    model work, so a stray object never reaches the sampler)."""
    for name, kind in CONDITIONS.items():
        if type(condition) is kind:
            return name
    raise TypeError(f"{type(condition).__name__} is not a registered condition kind (known: "
                    f"{', '.join(CONDITIONS)}); add its class to ltx2_core.conditioning.registry.CONDITIONS")


def apply_conditions(stream: ConditionedStream, conditions: Sequence[Condition]) -> ConditionedStream:
    """`stream` with the conditions of its modality applied in order (a later one wins where they overlap); the
    others are skipped. No condition of this modality: the stream unchanged (no mask, nothing appended)."""
    for condition in conditions:
        condition_kind(condition)
        if condition.modality == stream.modality:
            stream = condition.apply(stream)
    return stream


def condition_video(clean: torch.Tensor, positions: torch.Tensor, conditions: Sequence[Condition],
                    fps: float, keyframe_frames: int = VIDEO_TIME_SCALE,
                    grid: tuple[int, int, int] | None = None) -> ConditionedStream:
    """The video tokens (1, F'·H'·W', 128) at their positions (1, 3, tokens, 2) with the video's conditions;
    `keyframe_frames`: the release's keyframe time span (`Release.keyframe_frames`); `grid`: (F', H', W'), which
    generated keyframe slots need."""
    stream = ConditionedStream.start(VIDEO, clean, positions, fps, keyframe_frames, grid)
    return apply_conditions(stream, conditions)


def condition_audio(clean: torch.Tensor, positions: torch.Tensor, conditions: Sequence[Condition],
                    fps: float) -> ConditionedStream:
    """The audio tokens (1, T, 128) at their positions (1, 1, T, 2) with the audio's conditions."""
    return apply_conditions(ConditionedStream.start(AUDIO, clean, positions, fps), conditions)
