"""Long video with sound (`ltx2_core.windows`, `ltx2_core.long_video`, the `continuation` condition) on the tiny demo
model: the windows' plan, each window holding the previous one's last latent frames (video and audio) as an exact
copy in every stage, the joins measured against the within-window statistics (pixels, latents, sound), and every bad
window setting refused before any model work, in the API and on the command line."""

from __future__ import annotations

import itertools
import re

import pytest
import torch
from support.seams import audio_latent_seams, pixel_seams, sound_seams, video_latent_seams

from ltx2_core.__main__ import main
from ltx2_core.conditioning import (
    AUDIO,
    CONDITIONS,
    VIDEO,
    AudioCondition,
    Continuation,
    Retake,
    condition_audio,
    condition_video,
)
from ltx2_core.conditioning.control import ControlCondition
from ltx2_core.conditioning.images import ImageCondition
from ltx2_core.conditioning.video import VideoCondition
from ltx2_core.demo.models import demo_models
from ltx2_core.geometry import audio_latent_length, audio_positions, latent_shape, video_positions
from ltx2_core.long_video import continuation, generate_long, plan_windows, sample_windows, window_request
from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.pipeline import encode_request, generate, sample_request
from ltx2_core.request import Request
from ltx2_core.stages import decode
from ltx2_core.windows import Windows, frames_for

SIZE, FPS = 64, 24.0
# three windows of 33 frames (5 latent frames) sharing 16 (2 latent frames): each adds 2 latent frames
LONG = Windows(33, 16)
FRAMES = 33 + 2 * 16  # 65


class NoSampler:
    """A sampler that fails the test when a stage reaches it."""

    config, device = TransformerConfig.tiny("2.0"), torch.device("cpu")

    def __call__(self, *args, **kwargs):
        pytest.fail("a stage was sampled")


NO_SAMPLER = NoSampler()
SLACK = 0.05  # a join's measure may lie 5 % outside the within-window range (docs/video_in/long_video.md)


@pytest.fixture(scope="module")
def models():
    return demo_models("2.0")  # its vocoder is the fastest of the demos (24 kHz)


def _request(**settings) -> Request:
    return Request("waves on a pebble beach", **{"width": SIZE, "height": SIZE, "frames": FRAMES, "fps": FPS,
                                                 "steps": 3, "windows": LONG} | settings)


# the plan


def test_thirty_seconds_at_24_fps_cut_into_windows_join_to_the_one_clips_length():
    frames = frames_for(30, 24)
    assert frames == 721
    windows = Windows(121, 24).plan(frames, 24.0, "p")
    assert len(windows) == 8 and [w.latent_start for w in windows] == [12 * i for i in range(8)]
    assert [w.frames for w in windows] == [121] * 7 + [49]  # the last one ends on the clip's last frame
    assert [w.held for w in windows] == [0] + [3] * 7
    # 200·12/24 = 100 audio latents a window: exact, and the shared audio is the shared video's time (1.04 s)
    assert [w.audio_start for w in windows] == [100 * i for i in range(8)]
    assert {w.audio_shared for w in windows[1:]} == {26}
    video = sum(w.latent_frames - w.video_kept for w in windows)
    audio = sum(w.audio_frames - w.audio_kept for w in windows)
    assert (video, audio) == (latent_shape(frames, 32, 32)[0], audio_latent_length(frames, 24.0))


def test_a_clip_that_fits_one_window_is_one_window_and_prompts_repeat_their_last():
    assert len(Windows(121, 24).plan(97, 24.0, "p")) == 1
    windows = Windows(17, 8, ("a", "b")).plan(frames_for(1.3, 24), 24.0, "default")  # 33 frames
    assert [w.prompt for w in windows] == ["a", "b", "b"]
    assert [w.prompt for w in Windows(17, 8).plan(41, 24.0, "default")] == ["default"] * 4


def test_the_continuation_holds_its_frames_exactly_and_leaves_frame_0_free():
    assert CONDITIONS["continuation"] is Continuation
    held = torch.randn(1, 128, 2, 2, 2)
    stream = condition_video(torch.zeros(1, 5 * 4, 128), video_positions(5, 2, 2, FPS),
                             [Continuation(VIDEO, held, 1)], FPS)
    assert stream.mask[0, :, 0].tolist() == [1.0] * 4 + [0.0] * 8 + [1.0] * 8
    assert torch.equal(stream.clean[0, 4:12], held[0].flatten(1).T)
    audio = condition_audio(torch.zeros(1, 9, 128), audio_positions(9), [Continuation(AUDIO, torch.ones(1, 8, 3, 16), 1)],
                            FPS)
    assert audio.mask[0, :, 0].tolist() == [1.0] + [0.0] * 3 + [1.0] * 5
    with pytest.raises(ValueError, match="frame 0 stays free"):
        condition_video(torch.zeros(1, 20, 128), video_positions(5, 2, 2, FPS), [Continuation(VIDEO, held, 0)], FPS)


# sampling: the held overlap is a copy, the joins are measured


def _assert_held_exactly(pieces) -> None:
    """Each window's held video frames and audio latents equal, bit for bit, the previous window's of each stage."""
    for before, after in itertools.pairwise(pieces):
        w, p = after.window, before.window
        video_from, audio_from = w.latent_start + 1 - p.latent_start, w.audio_start + 1 - p.audio_start
        for old, new in zip(before.stages, after.stages, strict=True):
            assert torch.equal(new.video[:, :, 1:1 + w.held], old.video[:, :, video_from:video_from + w.held])
            count = w.audio_shared - 1
            assert torch.equal(new.audio[:, :, 1:1 + count], old.audio[:, :, audio_from:audio_from + count])
            assert not torch.equal(new.video[:, :, 1 + w.held:], old.video[:, :, :new.video.shape[2] - 1 - w.held])


def test_three_windows_with_sound_hold_the_overlap_exactly_and_show_no_seam(models, one_thread):
    request = _request()
    windows = plan_windows(request)
    assert len(windows) == 3
    pieces = []
    latent, _ = sample_windows(request, models, pieces=pieces)
    _assert_held_exactly(pieces)
    # the join: the clip's frames around each seam are one window's own consecutive frames
    for piece in pieces[1:]:
        w = piece.window
        assert torch.equal(latent.video[:, :, w.latent_start + 1:w.latent_start + w.latent_frames],
                           piece.latent.video[:, :, 1:].cpu())
        assert torch.equal(latent.audio[:, :, w.audio_start + 1:w.audio_start + w.audio_frames],
                           piece.latent.audio[:, :, 1:].cpu())
    assert latent.video.shape[2] == latent_shape(FRAMES, SIZE, SIZE)[0]
    out = decode(latent, models.decoders)
    assert out.frames.shape[0] == FRAMES
    # every measure at every join lies inside the range of the same measure within the windows, ±5 %
    assert video_latent_seams(latent.video, windows).inside(SLACK)
    assert audio_latent_seams(latent.audio, windows).inside(SLACK)
    assert pixel_seams(out.frames, windows).inside(SLACK)
    steps, rms = sound_seams(out.waveform, out.sample_rate, windows)
    assert steps.inside(SLACK) and rms.inside(SLACK)
    # the measure can fail: the sound of each window decoded alone and concatenated jumps at the joins
    sounds = []
    for piece in pieces:
        alone = decode(piece.latent._replace(video=None), models.decoders)
        start = 0 if piece.window.index == 0 else (4 * piece.window.audio_kept - 3) * alone.sample_rate // 100
        sounds.append(alone.waveform[:, start:])
    assert not sound_seams(torch.cat(sounds, dim=1), out.sample_rate, windows)[0].inside(slack=0.5)


@pytest.mark.parametrize("mode", ["two-stage", "distilled"])
def test_each_stage_holds_the_previous_windows_latent_of_that_stage(models, mode, one_thread):
    pieces = []
    request = _request(mode=mode, width=2 * SIZE, height=2 * SIZE, steps=None if mode == "distilled" else 2)
    sample_windows(request, models, pieces=pieces)
    assert [len(p.stages) for p in pieces] == [2, 2, 2]
    assert pieces[0].stages[0].video.shape[3:] == (2, 2) and pieces[0].stages[1].video.shape[3:] == (4, 4)
    _assert_held_exactly(pieces)


def test_generate_refuses_a_long_request_and_generate_long_runs_a_short_one(models):
    with pytest.raises(ValueError, match="generate_long"):
        generate(_request(), models)
    short = _request(frames=17, steps=1, windows=Windows(33, 16, ("first window",)))
    one = generate_long(short, models)
    assert one.frames.shape[0] == 17


# bad input, before any model work


@pytest.mark.parametrize("windows, match", [
    (Windows(33, 33), "below the window"),
    (Windows(33, 40), "below the window"),
    (Windows(33, 28), "below the window"),
    (Windows(33, 12), "multiple of 8"),
    (Windows(33, 0), "multiple of 8"),
    (Windows(32, 8), "8k\\+1"),
    (Windows(9, 8), "8k\\+1 ≥ 17"),
    (Windows(33, 16, ("a", " ")), "non-empty"),
])
def test_bad_windows_are_refused_with_the_fix(windows, match, models):
    with pytest.raises(ValueError, match=match):
        _request(windows=windows).check()
    for run in (generate, generate_long):  # before any model work
        with pytest.raises(ValueError, match=match):
            run(_request(windows=windows), models._replace(transformer=None), sampler=NO_SAMPLER)


@pytest.mark.parametrize("settings, match", [
    ({"audio_only": True}, "audio_only"),
    ({"retake": Retake("clip.mp4", 0.0, 1.0)}, "retake"),
    ({"video_input": VideoCondition("clip.mp4")}, "video_input"),
    ({"audio": AudioCondition("voice.wav")}, "input audio"),
    ({"controls": (ControlCondition("depth.mp4"),)}, "control videos"),
    ({"images": (ImageCondition("cat.png", 40),)}, "first window only"),
])
def test_what_windows_cannot_continue_is_refused(settings, match):
    with pytest.raises(ValueError, match=match):
        _request(**settings).check()


@pytest.mark.parametrize("argv, match", [
    (["--duration", "3", "--window", "33", "--overlap", "33"], "below the window"),
    (["--duration", "3", "--window", "33", "--overlap", "12"], "multiple of 8"),
    (["--duration", "3", "--window", "30"], "8k\\+1"),
    (["--duration", "3", "--frames", "33"], "--duration or --frames"),
    (["--duration", "0"], "positive number of seconds"),
    (["--window", "33"], "--duration"),
    (["--duration", "3", "--audio-only", "--output", "x.wav"], "audio_only"),
    (["--duration", "3", "--retake", "clip.mp4:0:1"], "--retake"),
    (["--duration", "3", "--video", "clip.mp4"], "--video"),
])
def test_the_command_line_refuses_bad_windows_before_model_work(argv, match, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("ltx2_core.model_files.ModelFiles.load", lambda *a, **k: pytest.fail("models loaded"))
    assert main(["--width", "64", "--height", "64", "--output", str(tmp_path / "x.mp4"), *argv]) == 2
    assert re.search(match, capsys.readouterr().err)


def test_the_command_line_writes_a_long_clip(tmp_path, capsys, one_thread):
    out = tmp_path / "long.mp4"
    assert main(["--width", "64", "--height", "64", "--duration", "1", "--window", "17", "--overlap", "8",
                 "--steps", "1", "--version", "2.0", "--window-prompt", "a wave", "--window-prompt", "a gull",
                 "--no-progress", "--output", str(out)]) == 0
    assert "25 frames" in capsys.readouterr().out and out.stat().st_size > 0



def test_a_window_continues_what_it_holds(models):
    """The held frames reach the model: the same window (same seed, prompt) holding two different pasts generates
    different new frames and sound; holding the same past, the same ones."""
    request = _request()
    first, second = plan_windows(request)[:2]
    pasts = []
    for seed in (0, 1):
        pieces = []
        sample_windows(_request(seed=seed, frames=first.frames), models, pieces=pieces)
        pasts.append(pieces[0])
    prompts = encode_request(request, models.prompt_encoder, models.transformer.config)
    one = window_request(request, second)
    new = [sample_request(one, models, *prompts, held=continuation(second, past.window, past.stages))[0]
           for past in (*pasts, pasts[0])]
    kept = second.video_kept
    assert not torch.allclose(new[0].video[:, :, kept:], new[1].video[:, :, kept:], atol=1e-3)
    assert not torch.allclose(new[0].audio[:, :, second.audio_kept:], new[1].audio[:, :, second.audio_kept:], atol=1e-3)
    assert torch.equal(new[0].video, new[2].video) and torch.equal(new[0].audio, new[2].audio)
