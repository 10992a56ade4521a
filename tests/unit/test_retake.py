"""Retake (regenerate [start, end) s of a clip) through the condition, the pipeline and the command line, on real mp4s
made with PyAV (with and without sound): the tokens outside the span keep the file's encoded latents exactly, those
inside are sampled; a file's sound is read, encoded and held the same way, a silent file's sound is generated whole;
every bad span, file or setting is refused (exit 2 on the command line) before any model work."""

from __future__ import annotations

import re

import av
import pytest
import torch
from unit.test_video_to_audio import BAD, FPS, FRAMES, SIZE, _bad_video, write_video

from ltx2_core.__main__ import main
from ltx2_core.conditioning import EncodedAudio, EncodedVideo, Retake, condition_audio, condition_video, encode_retake
from ltx2_core.conditioning.retake import conform_length
from ltx2_core.demo.models import demo_models
from ltx2_core.geometry import audio_latent_length, audio_positions, latent_shape, video_positions
from ltx2_core.pipeline import Request, encode_request_retake, generate, sample_request
from ltx2_core.video_io import video_info

SPAN = (0.1, 0.3)  # video latent frame 1 of 0..1 ([1/24, 9/24) s); audio latents 3..8 of 0..8


@pytest.fixture(scope="module")
def models():
    return demo_models("2.3")


@pytest.fixture(scope="module")
def loud(tmp_path_factory):
    return write_video(tmp_path_factory.mktemp("retake") / "loud.mp4", sound=True)


@pytest.fixture(scope="module")
def silent(tmp_path_factory):
    return write_video(tmp_path_factory.mktemp("retake") / "silent.mp4")


def _request(path, span=SPAN, **settings) -> Request:
    flags = {k: settings.pop(k) for k in ("regenerate_video", "regenerate_audio") if k in settings}
    return Request("a dog barks", **{"width": SIZE, "height": SIZE, "frames": FRAMES, "fps": float(FPS), "steps": 2,
                                     "retake": Retake(path, *span, **flags)} | settings)


def _inside(latent_frames: int, audio_tokens: int, span) -> tuple[torch.Tensor, torch.Tensor]:
    """Which video latent frames and audio latents the span regenerates (bool (F',), (T,))."""
    rows = cols = SIZE // 32
    video = condition_video(torch.zeros(1, latent_frames * rows * cols, 128),
                            video_positions(latent_frames, rows, cols, FPS),
                            [EncodedVideo(torch.zeros(1, 128, latent_frames, rows, cols), 1.0, span)], FPS)
    audio = condition_audio(torch.zeros(1, audio_tokens, 128), audio_positions(audio_tokens),
                            [EncodedAudio(torch.zeros(1, 8, audio_tokens, 16), 1.0, span)], FPS)
    return video.mask[0, :, 0].reshape(latent_frames, rows * cols)[:, 0].bool(), audio.mask[0, :, 0].bool()


# the span's masks


def test_the_span_marks_the_latent_frames_and_audio_latents_it_meets():
    video, audio = _inside(2, 9, SPAN)
    assert video.tolist() == [False, True]
    # audio latent n covers [max(4n − 3, 0), 4n + 1) × 10 ms: n = 2 is [0.05, 0.09), n = 3 [0.09, 0.13), n = 8 [0.29, 0.33)
    assert audio.tolist() == [False] * 3 + [True] * 6
    video, audio = _inside(2, 9, (0.0, 0.01))  # inside the first frame: frame 0 only, audio latent 0 only
    assert video.tolist() == [True, False] and audio.tolist() == [True] + [False] * 8
    video, _ = _inside(2, 9, (1 / 24, 0.05))  # a span starting on frame 0's end border: frame 1 only
    assert video.tolist() == [False, True]


def test_a_kept_stream_is_frozen_and_a_short_sound_is_padded_with_zeros():
    latent = torch.randn(1, 128, 2, 2, 2)
    clean = torch.zeros(1, 8, 128)
    kept = condition_video(clean, video_positions(2, 2, 2, FPS), [EncodedVideo(latent, 1.0, None)], FPS)
    spanned = condition_video(clean, video_positions(2, 2, 2, FPS), [EncodedVideo(latent, 1.0, SPAN)], FPS)
    assert kept.frozen and not spanned.frozen
    assert torch.equal(spanned.clean, kept.clean)  # the same held values; only the mask differs
    sound = torch.randn(1, 8, 5, 16)
    padded = conform_length(sound, 7)
    assert torch.equal(padded[:, :, :5], sound) and torch.equal(padded[:, :, 5:], torch.zeros(1, 8, 2, 16))
    assert torch.equal(conform_length(sound, 3), sound[:, :, :3])


# checks before model work


@pytest.mark.parametrize("span, match", [
    ((0.3, 0.1), "is empty; give a start below the end"),
    ((0.2, 0.2), "is empty"),
    ((-0.1, 0.2), "before the clip; give a start ≥ 0"),
    ((0.1, 0.5), "ends at 0.5 s and"),
    ((0.4, 0.6), "give an end ≤ 0.375"),
    ((0.1, float("nan")), "end must be a time in seconds"),
    (("0.1", 0.2), "start must be a time in seconds"),
])
def test_a_span_outside_the_clip_or_empty_is_refused(loud, span, match):
    with pytest.raises(ValueError, match=re.escape(match)):
        Retake(loud, *span).check()


@pytest.mark.parametrize("kind, match", BAD)
def test_every_bad_file_is_refused_naming_the_fix(kind, match, tmp_path):
    with pytest.raises(ValueError, match=re.escape(match)):
        Retake(_bad_video(kind, tmp_path), 0.0, 0.1).check()


def test_keeping_both_streams_of_a_file_with_sound_is_refused(loud, silent):
    with pytest.raises(ValueError, match="nothing would be regenerated"):
        Retake(loud, *SPAN, regenerate_video=False, regenerate_audio=False).check()
    assert Retake(silent, *SPAN, regenerate_video=False, regenerate_audio=False).check().frames == FRAMES  # sound
    with pytest.raises(ValueError, match="regenerate_audio must be True or False"):
        Retake(loud, *SPAN, regenerate_audio="no").check()


@pytest.mark.parametrize("change, match", [
    ({"width": 96}, "is 64x64, 9 frames at 24 fps and the request 96x64"),
    ({"fps": 25.0}, "generate at the video's own size, frames and fps"),
    ({"mode": "two-stage", "width": 128, "height": 128}, "a retake runs one stage"),
    ({"audio_only": True}, "has no video to retake"),
    ({"retake": ("clip.mp4", 0, 1)}, "retake must be a Retake"),
])
def test_a_request_the_file_cannot_serve_is_refused(loud, change, match):
    with pytest.raises(ValueError, match=re.escape(match)):
        _request(loud, **change).check()


def test_a_model_without_the_encoders_is_refused(models, loud, silent):
    with pytest.raises(ValueError, match="a retake needs the video VAE encoder"):
        generate(_request(loud), models._replace(video_encoder=None))
    with pytest.raises(ValueError, match="has sound, which the retake holds"):
        generate(_request(loud), models._replace(audio_encoder=None))
    assert generate(_request(silent, steps=1), models._replace(audio_encoder=None)).frames.shape[0] == FRAMES


# the pipeline


@pytest.mark.parametrize("mode", ["one-stage", "distilled"])
def test_the_span_is_regenerated_and_the_rest_kept_exactly(models, loud, mode):
    request = _request(loud, mode=mode, steps=None if mode == "distilled" else 2)
    request.check()
    video, audio = encode_request_retake(request, models)
    frames = latent_shape(FRAMES, SIZE, SIZE)
    tokens = audio_latent_length(FRAMES, FPS)
    assert video.latent.shape == (1, 128, *frames) and video.span == SPAN
    assert audio.latent.shape == (1, 8, tokens, 16) and audio.span == SPAN and audio.latent.abs().max() > 0
    positive, negative = models.prompt_encoder.encode(request.prompt, "noise" if mode == "one-stage" else None)
    latent, _ = sample_request(request, models, positive, negative, retake=(video, audio))
    inside_video, inside_audio = _inside(frames[0], tokens, SPAN)
    assert torch.equal(latent.video[:, :, ~inside_video], video.latent[:, :, ~inside_video])
    assert (latent.video[:, :, inside_video] - video.latent[:, :, inside_video]).abs().max() > 0.1
    assert torch.equal(latent.audio[:, :, ~inside_audio], audio.latent[:, :, ~inside_audio])
    assert (latent.audio[:, :, inside_audio] - audio.latent[:, :, inside_audio]).abs().max() > 0.1
    result = generate(request, models)
    assert result.frames.shape == (FRAMES, SIZE, SIZE, 3) and result.fps == FPS
    assert result.waveform.shape[0] == 2 and abs(result.waveform.shape[1] / result.sample_rate - FRAMES / FPS) < 0.05


def test_the_kept_stream_and_a_silent_file(models, loud, silent):
    request = _request(loud, regenerate_audio=False)
    video, audio = encode_request_retake(request, models)
    assert video.span == SPAN and audio.span is None  # the sound held whole (frozen)
    positive, negative = models.prompt_encoder.encode(request.prompt, "noise")
    latent, _ = sample_request(request, models, positive, negative, retake=(video, audio))
    assert torch.equal(latent.audio, audio.latent)
    request = _request(loud, regenerate_video=False)
    video, audio = encode_request_retake(request, models)
    latent, _ = sample_request(request, models, positive, negative, retake=(video, audio))
    assert video.span is None and torch.equal(latent.video, video.latent)
    request = _request(silent)
    video, audio = encode_request_retake(request, models)
    assert audio is None and video_info(silent).has_sound is False  # no sound: generated over the whole clip
    latent, _ = sample_request(request, models, positive, negative, retake=(video, None))
    assert latent.audio.shape == (1, 8, audio_latent_length(FRAMES, FPS), 16)


def test_the_encoded_video_is_the_files(models, loud):
    from ltx2_core.video_io import read_video

    video, _ = encode_retake(Retake(loud, *SPAN), models.video_encoder, models.audio_encoder, video_info(loud))
    torch.testing.assert_close(video.latent, models.video_encoder(read_video(loud)), atol=0, rtol=0)


# the command line


def test_the_command_line_writes_the_retaken_clip(loud, silent, tmp_path, capsys):
    for path, extra in ((loud, ["--steps", "1"]), (loud, ["--steps", "1", "--keep-audio"]),
                        (silent, ["--mode", "distilled"])):
        output = tmp_path / "out.mp4"
        assert main(["--retake", f"{path}:0.1:0.3", "--output", str(output)] + extra) == 0, capsys.readouterr().err
        assert f"wrote {output}: 9 frames 64x64 at 24 fps" in capsys.readouterr().out
        with av.open(str(output)) as container:
            video, audio = container.streams.video[0], container.streams.audio[0]
            assert (video.codec_context.width, video.codec_context.height, video.frames) == (SIZE, SIZE, FRAMES)
            assert audio.channels == 2


@pytest.mark.parametrize("argv, match", [
    (["--retake", "{loud}:0.3:0.1"], "is empty; give a start below the end"),
    (["--retake", "{loud}:0.1:2"], "ends at 2 s and"),
    (["--retake", "{loud}:0.1:0.3", "--keep-video", "--keep-audio"], "nothing would be regenerated"),
    (["--keep-audio"], "--keep-video and --keep-audio go with --retake"),
    (["--retake", "{loud}:0.1:0.3", "--video", "{loud}"], "give one of them"),
    (["--retake", "{loud}:0.1:0.3", "--width", "96"], "--width 96 differs from the video's 64"),
    (["--retake", "{loud}:0.1:0.3", "--mode", "two-stage"], "a retake runs one stage"),
    (["--retake", "{loud}:0.1:0.3", "--image", "x.png"], "takes no image, audio or video_input"),
    (["--retake", "{corrupt}:0:0.1"], "damaged or not a video PyAV can decode"),
    (["--retake", "{missing}:0:0.1"], "does not exist; check the path"),
])
def test_bad_input_exits_2_before_model_work(loud, tmp_path, capsys, argv, match):
    corrupt = _bad_video("corrupt", tmp_path)
    argv = [a.format(loud=loud, corrupt=corrupt, missing=tmp_path / "none.mp4") for a in argv]
    assert main(argv + ["--output", str(tmp_path / "x.mp4")]) == 2
    captured = capsys.readouterr()
    assert match in captured.err, captured.err
    assert "loaded in" not in captured.out and not (tmp_path / "x.mp4").exists()


def test_a_span_without_both_times_is_a_usage_error(loud, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--retake", f"{loud}:0.1", "--output", str(tmp_path / "x.mp4")])
    assert exit_.value.code == 2 and "e.g. clip.mp4:1.0:2.5" in capsys.readouterr().err
