"""A request of automatic length (`Request.auto_frames`, `ltx2_core.duration`): its bounds and what it cannot go
with, refused before any model work naming the fix; a model without the duration head refused before the prompt is
encoded (LTX-2.3; 2.5 files without it); the frame count resolved from the head's seconds with the contexts the
reference's pipelines give it (text to audio: the audio ones alone), the images' last frame placed at the clip's
end, and the choice logged with the raw seconds."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest
import torch

from ltx2_core.conditioning import AudioCondition, ControlCondition, ImageCondition, VideoCondition
from ltx2_core.conditioning.images import LAST_FRAME
from ltx2_core.conditioning.retake import Retake
from ltx2_core.duration import AutoFrames, check_auto_frames, resolve_frames
from ltx2_core.errors import SettingError
from ltx2_core.pipeline import Models, generate
from ltx2_core.request import Request
from ltx2_core.types import TextEmbeddings
from ltx2_core.windows import Windows

AUTO = AutoFrames(0.5, 4.0)
TEXT = TextEmbeddings(torch.randn(1, 4, 16), torch.randn(1, 4, 8))


class Head(torch.nn.Module):
    """A duration head that predicts `seconds` and records which contexts it was given."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.seconds, self.given = seconds, []

    def forward(self, video, audio):
        self.given.append((video is not None, audio is not None))
        return torch.tensor([self.seconds])


@pytest.mark.parametrize("field, value, fix", [
    ("video_input", VideoCondition("clip.mp4"), "comes from the file"),
    ("retake", Retake("clip.mp4", 0.0, 0.5), "comes from the file"),
    ("audio", AudioCondition("song.wav"), "LTX-2 Audio Condition's frames output"),
    ("controls", (ControlCondition("depth.mp4"),), "give frames, not auto"),
    ("windows", Windows(), "give the duration"),
])
def test_what_sets_the_length_otherwise_is_refused_with_auto(field, value, fix):
    request = Request("rain", frames=241 if field == "windows" else 121, auto_frames=AUTO, **{field: value})
    with pytest.raises(SettingError, match=fix):
        request.check()


@pytest.mark.parametrize("bounds", [(2.0, 1.0), (0.0, 1.0), (1.0, math.inf), (1.0, math.nan)])
def test_bad_bounds_are_refused(bounds):
    with pytest.raises(SettingError, match="0 < min ≤ max seconds"):
        Request("rain", auto_frames=AutoFrames(*bounds)).check()


def test_a_model_without_the_head_is_refused_naming_the_fix():
    request = Request("rain", auto_frames=AUTO)
    with pytest.raises(ValueError, match="LTX-2.3 has no duration head: give a frame count"):
        check_auto_frames(request, False, "2.3")
    with pytest.raises(ValueError, match="--duration-head FILE; in ComfyUI a duration head file"):
        check_auto_frames(request, False, "2.5")
    check_auto_frames(Request("rain"), False, "2.3")  # a frame count needs no head


def test_generate_refuses_before_encoding_the_prompt():
    from ltx2_core import TransformerConfig
    from ltx2_core.demo import demo_transformer

    class Encoder:
        def encode(self, *args, **kwargs):
            raise AssertionError("the prompt was encoded before the refusal")

    models = Models(demo_transformer(TransformerConfig.tiny("2.5")), Encoder(), None)
    with pytest.raises(ValueError, match="needs LTX-2.5's duration head"):
        generate(Request("rain", width=64, height=64, auto_frames=AUTO), models)


@pytest.mark.parametrize("audio_only, given", [(True, (False, True)), (False, (True, True))])
def test_the_frames_come_from_the_heads_seconds_with_the_references_contexts(audio_only, given, caplog):
    head = Head(1.3)  # 31.2 frames at 24 fps: 31 -> 25 on the 8k+1 grid
    with caplog.at_level(logging.INFO, logger="ltx2_core.duration"):
        resolved = resolve_frames(Request("rain", audio_only=audio_only, auto_frames=AUTO), head, TEXT)
    assert (resolved.frames, resolved.auto_frames) == (25, None) and head.given == [given]
    assert "1.30 s predicted: 25 frames at 24 fps" in caplog.text
    untouched = Request("rain", frames=9)
    assert resolve_frames(untouched, None, TEXT) is untouched


def test_a_clamped_prediction_is_warned_of_and_the_last_frame_placed_at_the_clips_end(caplog):
    image = ImageCondition(np.zeros((64, 64, 3), np.uint8), LAST_FRAME)
    request = Request("rain", width=64, height=64, images=(image,), auto_frames=AUTO)
    request.check()  # the last frame is placed once the length is known
    with caplog.at_level(logging.WARNING, logger="ltx2_core.duration"):
        resolved = resolve_frames(request, Head(60.0), TEXT)
    assert resolved.frames == 89 and resolved.images[0].frame == 88  # 4 s at 24 fps: 96, snapped down to 89
    assert "60.00 s predicted, outside [0.5, 4] s" in caplog.text
