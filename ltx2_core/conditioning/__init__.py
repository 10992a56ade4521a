"""Conditions applied to the video or audio stream state of a sampling stage (images held at frames, ...): the
`Condition` protocol and the stream state (`stream`), one module per kind (`images`; `keyframes`: images always
appended, as keyframe interpolation; `audio`, `video`, `control`; `retake`: a video and its sound held outside a time
span; `continuation`: a long video's window holding the previous window's last frames; `audio_reference`: a reference
sound appended at negative times, Dub-It; `dub`: a clip re-voiced, Dub-It; `keyframe_slots`: DFR's generated
keyframes), the kinds a stage accepts (`registry`)."""

from ltx2_core.conditioning.audio import AudioCondition, EncodedAudio, encode_audio_condition, holds_sound
from ltx2_core.conditioning.audio_reference import EncodedAudioReference
from ltx2_core.conditioning.continuation import Continuation
from ltx2_core.conditioning.dub import Dub, encode_dub_sound
from ltx2_core.conditioning.control import ControlCondition, EncodedControl, encode_control
from ltx2_core.conditioning.images import EncodedImage, ImageCondition, encode_conditions
from ltx2_core.conditioning.keyframes import EncodedKeyframe, encode_images
from ltx2_core.conditioning.keyframe_slots import KeyframeSlots
from ltx2_core.conditioning.registry import (
    CONDITIONS,
    apply_conditions,
    condition_audio,
    condition_kind,
    condition_video,
)
from ltx2_core.conditioning.retake import Retake, encode_retake
from ltx2_core.conditioning.stream import AUDIO, VIDEO, Condition, ConditionedStream, Modality
from ltx2_core.conditioning.video import EncodedVideo, VideoCondition, encode_video_condition

__all__ = [
    "AUDIO", "AudioCondition", "CONDITIONS", "EncodedAudio", "VIDEO", "Condition", "ConditionedStream", "EncodedImage", "ImageCondition", "Modality",
    "apply_conditions", "condition_audio", "condition_kind", "condition_video",
    "encode_audio_condition", "encode_conditions", "holds_sound",
    "EncodedVideo", "VideoCondition", "encode_video_condition",
    "ControlCondition", "EncodedControl", "encode_control",
    "Retake", "encode_retake", "Continuation", "EncodedKeyframe", "encode_images",
    "EncodedAudioReference", "Dub", "encode_dub_sound", "KeyframeSlots",
]
