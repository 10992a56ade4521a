"""The checks of a generation that need no model and no file's content (`request.check_settings`,
`request.check_stage_models`, `windows.Windows.check`, `retake.check_span`): each names the setting at fault
(`SettingError.setting`), so a ComfyUI node reports it on its input when a workflow is queued, and `Request.check`
runs the same functions for the command line and ltx2_core callers."""

from __future__ import annotations

import re

import pytest

from ltx2_core.conditioning.retake import check_span
from ltx2_core.errors import SettingError
from ltx2_core.request import Given, Request, check_settings, check_stage_models
from ltx2_core.windows import Windows, frames_for

SIZE = dict(mode="one-stage", width=96, height=64, frames=9, fps=24.0)


@pytest.mark.parametrize("changes, given, setting, words", [
    ({"width": 100}, Given(), "width", "multiples of 32"),
    ({"height": 0}, Given(), "height", "multiples of 32"),
    ({"frames": 16}, Given(), "frames", "8k+1"),
    ({"mode": "two-stage"}, Given(), "width", "multiples of 64"),
    ({"mode": "distilled", "width": 128, "steps": 3}, Given(), "steps", "fixed 8-step"),
    ({"mode": "bogus"}, Given(), "mode", "one of"),
    ({"fps": float("nan")}, Given(), "fps", "positive number"),
    ({"seed": -1}, Given(), "seed", "[0, 2^63)"),
    ({"mode": "two-stage", "width": 128}, Given(retake=True), "mode", "a retake runs one stage"),
    ({}, Given(retake=True, images=True), "images", "a retake holds its own file's video and sound"),
    ({}, Given(video_input=True, audio=True), "audio", "sound for a video holds the whole video"),
    ({}, Given(retake=True, controls=True), "controls", "control videos guide a generated video"),
    ({"audio_only": True, "mode": "distilled"}, Given(), "mode", "text to audio (audio_only) runs one stage"),
    ({"audio_only": True}, Given(images=True), "images", "no video to hold images"),
])
def test_each_setting_problem_names_its_setting(changes, given, setting, words):
    values = {**SIZE, **changes}
    audio_only = values.pop("audio_only", False)
    with pytest.raises(SettingError, match=re.escape(words)) as caught:
        check_settings(**values, audio_only=audio_only, given=given)
    assert caught.value.setting == setting


def test_unknown_settings_wait_and_a_retakes_clip_sizes_are_not_the_requests():
    check_settings("two-stage", None, None, None, None, unknown=frozenset({"width", "height", "frames", "fps"}))
    check_settings(None, 100, 64, 9, 24.0, unknown=frozenset({"mode", "width"}))
    check_settings("distilled", 100, 64, 16, 24.0, given=Given(retake=True),
                   unknown=frozenset({"width", "height", "frames", "fps"}))  # the clip's own, checked with the file
    check_settings("one-stage", 7, 7, 9, 24.0, audio_only=True)  # text to audio: width and height unused


def test_the_request_check_is_the_same_function():
    with pytest.raises(SettingError, match="multiples of 32") as caught:
        Request("a cat", width=100, height=64, frames=9).check()
    assert caught.value.setting == "width"
    with pytest.raises(SettingError) as caught:
        Request("a cat", width=128, height=64, frames=9, mode="distilled", steps=4).check()
    assert caught.value.setting == "steps"


def test_the_models_a_mode_needs():
    with pytest.raises(SettingError, match="x2 spatial latent upsampler") as caught:
        check_stage_models("distilled", upsampler=False, distilled_lora=False)
    assert caught.value.setting == "upsampler"
    with pytest.raises(SettingError, match="needs the distilled LoRA") as caught:
        check_stage_models("two-stage", upsampler=True, distilled_lora=False)
    assert caught.value.setting == "distilled_lora"
    check_stage_models("distilled", upsampler=False, distilled_lora=False, one_stage_input=True)  # a retake
    check_stage_models("one-stage", upsampler=False, distilled_lora=False)


def test_windows_refuse_an_overlap_reaching_the_window_and_prompts_no_window_uses():
    with pytest.raises(SettingError, match="must be below the window") as caught:
        Windows(33, 32).check(121, 24.0)
    assert caught.value.setting == "overlap"
    frames = frames_for(20.0, 24.0)
    assert Windows(121, 24).count(frames) == 5
    Windows(121, 24, tuple("abcde")).check(frames, 24.0)
    with pytest.raises(SettingError, match="6 window prompts for 5 window") as caught:
        Windows(121, 24, tuple("abcdef")).check(frames, 24.0)
    assert caught.value.setting == "prompts"
    with pytest.raises(SettingError, match="2 window prompts for 1 window") as caught:
        Windows(121, 24, ("a", "b")).check(97, 24.0)  # a clip within one window
    for seconds, fps, setting in ((float("nan"), 24.0, "duration"), (5.0, float("nan"), "fps"), (5.0, 0, "fps")):
        with pytest.raises(SettingError) as caught:
            frames_for(seconds, fps)
        assert caught.value.setting == setting


@pytest.mark.parametrize("span, has_sound, setting, words", [
    ((1.0, 0.5, True, True), None, "end", "is empty"),
    ((-1.0, 0.5, True, True), None, "start", "before the clip"),
    ((float("nan"), 0.5, True, True), None, "start", "a time in seconds"),
    ((0.0, 0.5, False, False), True, "regenerate_audio", "keeps both"),
    ((0.0, 0.5, "yes", True), None, "regenerate_video", "True or False"),
])
def test_a_retakes_span_names_its_setting(span, has_sound, setting, words):
    with pytest.raises(SettingError, match=words) as caught:
        check_span(*span, has_sound=has_sound)
    assert caught.value.setting == setting


def test_keeping_both_streams_of_a_silent_clip_generates_its_sound():
    check_span(0.0, 0.5, False, False, has_sound=False)
    check_span(0.0, 0.5, False, False)  # the clip not known yet
