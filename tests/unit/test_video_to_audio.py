"""Sound for a silent video (video to audio) through `video_io`, the pipeline and the command line, on real mp4s
made with PyAV: the file is read at its own size, frames and fps; its latent is held frozen while the sound is
sampled in one stage; the output is the video's VAE round trip with the new sound; every bad file or setting is
refused (exit 2 on the command line) before any model work."""

from __future__ import annotations

import re

import av
import numpy as np
import pytest
import torch

from ltx2_core.__main__ import main
from ltx2_core.conditioning import (
    CONDITIONS,
    AudioCondition,
    EncodedVideo,
    ImageCondition,
    VideoCondition,
    condition_video,
)
from ltx2_core.demo.models import demo_models
from ltx2_core.geometry import latent_shape, video_positions
from ltx2_core.pipeline import Request, encode_request_video, generate, sample_request
from ltx2_core.video_io import check_video_file, read_video, video_info

SIZE, FRAMES, FPS = 64, 9, 24


def write_video(path, width: int = SIZE, height: int = SIZE, frames: int = FRAMES, fps: int = FPS,
                sound: bool = False, seed: int = 0):
    """A real H.264 mp4 (PyAV) of moving gradients plus noise; `sound`: with an AAC track of a sine."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        audio = container.add_stream("aac", rate=44100, layout="stereo") if sound else None
        for i in range(frames):
            base = np.stack([(x * 3 + i * 9) % 256, (y * 4 + i * 5) % 256, (x + y + i * 17) % 256], axis=-1)
            image = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode())
        if audio is not None:
            t = np.arange(round(frames / fps * 44100) + 1024) / 44100
            pcm = np.repeat((0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None], 2, axis=0)
            frame = av.AudioFrame.from_ndarray(pcm, format="fltp", layout="stereo")
            frame.sample_rate = 44100
            container.mux(audio.encode(frame))
            container.mux(audio.encode(None))
    return path


def _decoded(path) -> torch.Tensor:
    with av.open(str(path)) as container:
        return torch.stack([torch.from_numpy(f.to_ndarray(format="rgb24")) for f in container.decode(video=0)])


@pytest.fixture(scope="module")
def models():
    return demo_models("2.3")


@pytest.fixture
def clip(tmp_path):
    return write_video(tmp_path / "silent.mp4")


def _request(path, **settings) -> Request:
    return Request("rain on a tin roof", **{"width": SIZE, "height": SIZE, "frames": FRAMES, "fps": float(FPS),
                                            "steps": 2, "video_input": VideoCondition(path)} | settings)


# reading


def test_the_header_and_the_frames_are_read_as_they_are(clip):
    assert video_info(clip) == (SIZE, SIZE, FRAMES, float(FPS), False)
    assert check_video_file(clip) == video_info(clip)
    pixels = read_video(clip)
    assert pixels.shape == (1, 3, FRAMES, SIZE, SIZE) and pixels.dtype == torch.float32
    # at the file's own size a pure copy of the decoded RGB frames, mapped to [-1, 1]
    want = _decoded(clip).float().permute(3, 0, 1, 2)[None] / 127.5 - 1.0
    assert torch.equal(pixels, want)


def test_other_sizes_cover_and_crop_and_fewer_frames_are_the_first(tmp_path):
    path = write_video(tmp_path / "wide.mp4", width=128, height=64, frames=17)
    pixels = read_video(path, 32, 32, frames=9)
    assert pixels.shape == (1, 3, 9, 32, 32)
    whole = read_video(path, 32, 64)  # an exact halving: the crop takes the middle of the 64-wide cover
    torch.testing.assert_close(pixels, whole[:, :, :9, :, 16:48], atol=0, rtol=0)
    with pytest.raises(ValueError, match="gives 17 frames from 0 s and the clip needs 25"):
        read_video(path, frames=25)
    with pytest.raises(ValueError, match="runs at 24 fps and the clip at 25"):
        read_video(path, fps=25)


@pytest.mark.parametrize("fps", [24, 25])
def test_the_first_frames_of_a_longer_file_are_exactly_as_many_as_asked(tmp_path, fps):
    """At 24 fps a frame's float time (pts x time base) lands a hair below n / 24 for some n: read by times, 17, 25,
    65, 89, 97 and 121 frames of a longer file came back one frame too long (and a control video was then refused
    after the model loaded)."""
    path = write_video(tmp_path / "long.mp4", width=32, height=32, frames=130, fps=fps)
    decoded = _decoded(path).float().permute(3, 0, 1, 2)[None] / 127.5 - 1.0
    for count in (9, 17, 25, 65, 89, 97, 121):
        pixels = read_video(path, frames=count)
        assert pixels.shape[2] == count, count
        assert torch.equal(pixels, decoded[:, :, :count]), count
    for start, count in ((0.5, 17), (1.0, 25), (1.25, 17)):
        first = round(start * fps)
        assert torch.equal(read_video(path, start=start, frames=count), decoded[:, :, first:first + count])


def _bad_video(kind: str, tmp_path):
    if kind == "missing":
        return tmp_path / "nowhere.mp4"
    if kind == "folder":
        return tmp_path
    if kind == "corrupt":
        path = tmp_path / "noise.mp4"
        path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
        return path
    if kind == "audio only":
        path = tmp_path / "tone.wav"
        with av.open(str(path), "w") as container:
            stream = container.add_stream("pcm_s16le", rate=16000, layout="mono")
            frame = av.AudioFrame.from_ndarray(np.zeros((1, 16000), np.int16), format="s16", layout="mono")
            frame.sample_rate = 16000
            for packet in (*stream.encode(frame), *stream.encode(None)):
                container.mux(packet)
        return path
    if kind == "size":
        return write_video(tmp_path / "odd.mp4", width=80, height=64)
    if kind == "frames":
        return write_video(tmp_path / "ten.mp4", frames=10)
    if kind == "too few":
        return write_video(tmp_path / "one.mp4", frames=1)
    raise AssertionError(kind)


BAD = [("missing", "does not exist; check the path"), ("folder", "is a folder"),
       ("corrupt", "damaged or not a video PyAV can decode"), ("audio only", "has no video stream"),
       ("size", "is 80x64; width and height must be multiples of 32"),
       ("frames", "has 10 frames; the frame count must be 8k+1 (e.g. 97, 121): keep the first 9"),
       ("too few", "has 1 frame(s) (0.042 s); it needs at least 9")]


@pytest.mark.parametrize("kind, match", BAD)
def test_every_bad_file_is_refused_naming_the_fix(kind, match, tmp_path):
    with pytest.raises(ValueError, match=re.escape(match)):
        check_video_file(_bad_video(kind, tmp_path))


# the condition and the pipeline


def test_the_condition_freezes_the_whole_video_stream():
    assert CONDITIONS["video"] is EncodedVideo
    frames, rows, cols = latent_shape(FRAMES, SIZE, SIZE)
    latent = torch.randn(1, 128, frames, rows, cols)
    clean = torch.zeros(1, frames * rows * cols, 128)
    positions = video_positions(frames, rows, cols, 24.0)
    frozen = condition_video(clean, positions, [EncodedVideo(latent, 1.0)], 24.0)
    assert frozen.frozen and torch.equal(frozen.mask, torch.zeros(1, frames * rows * cols, 1))
    assert torch.equal(frozen.clean, latent.flatten(2).transpose(1, 2))
    partial = condition_video(clean, positions, [EncodedVideo(latent, 0.25)], 24.0)
    assert not partial.frozen and torch.equal(partial.mask, torch.full((1, frames * rows * cols, 1), 0.75))
    with pytest.raises(ValueError, match="generate at the video's own size"):
        condition_video(clean[:, :2], positions[:, :, :2], [EncodedVideo(latent, 1.0)], 24.0)


@pytest.mark.parametrize("mode", ["one-stage", "distilled"])
def test_the_video_is_held_and_the_sound_is_generated(models, clip, mode):
    request = _request(clip, mode=mode, steps=None if mode == "distilled" else 2)
    encoded = encode_request_video(request, models)
    assert encoded.latent.shape == (1, 128, *latent_shape(FRAMES, SIZE, SIZE)) and encoded.strength == 1.0
    torch.testing.assert_close(encoded.latent, models.video_encoder(read_video(clip)), atol=0, rtol=0)
    positive, negative = models.prompt_encoder.encode(request.prompt, "noise" if mode == "one-stage" else None)
    latent, _ = sample_request(request, models, positive, negative, video=encoded)
    assert torch.equal(latent.video, encoded.latent)  # frozen: the encoded latent exactly, one stage at full size
    result = generate(request, models)
    assert result.frames.shape == (FRAMES, SIZE, SIZE, 3) and result.fps == FPS
    assert result.waveform.shape[0] == 2 and result.waveform.abs().max() > 0
    assert abs(result.waveform.shape[1] / result.sample_rate - FRAMES / FPS) < 0.05


def test_the_sound_follows_the_seed_and_the_video(models, clip, tmp_path):
    first = generate(_request(clip, seed=1), models)
    again = generate(_request(clip, seed=1), models)
    other_seed = generate(_request(clip, seed=2), models)
    torch.testing.assert_close(again.waveform, first.waveform, atol=1e-5, rtol=0)
    assert (other_seed.waveform - first.waveform).abs().max() > 1e-3
    # another video, the same seed: another audio latent (the tiny random model listens weakly: compared before
    # the decoder, which squashes small latent changes)
    request = _request(clip, seed=1)
    positive, negative = models.prompt_encoder.encode(request.prompt, "noise")
    held = encode_request_video(request, models)
    sampled, _ = sample_request(request, models, positive, negative, video=held)
    moved, _ = sample_request(request, models, positive, negative, video=held._replace(latent=-3 * held.latent))
    assert (moved.audio - sampled.audio).abs().max() > 1e-3


@pytest.mark.parametrize("change, match", [
    ({"width": 96}, "is 64x64, 9 frames at 24 fps and the request 96x64"),
    ({"frames": 17}, "generate at the video's own size, frames and fps"),
    ({"fps": 25.0}, "9 frames at 25 fps"),
    ({"mode": "two-stage", "width": 128, "height": 128}, "use mode one-stage"),
    ({"images": (ImageCondition(np.zeros((64, 64, 3), np.uint8)),)}, "takes no image or audio condition"),
    ({"audio": AudioCondition("voice.wav")}, "takes no image or audio condition"),
    ({"video_input": "clip.mp4"}, "video_input must be a VideoCondition"),
])
def test_a_request_the_video_cannot_serve_is_refused(clip, change, match):
    request = _request(clip, **change)
    with pytest.raises(ValueError, match=match):
        request.check()


def test_bad_strength_and_a_model_without_the_video_encoder_are_refused(models, clip):
    with pytest.raises(ValueError, match=r"video strength must be in \[0, 1\]"):
        _request(clip, video_input=VideoCondition(clip, 1.5)).check()
    with pytest.raises(ValueError, match="needs the video VAE encoder"):
        generate(_request(clip), models._replace(video_encoder=None))


# the command line


def test_the_command_line_writes_the_video_with_its_new_sound(clip, tmp_path, capsys):
    output = tmp_path / "out.mp4"
    assert main(["--video", str(clip), "--steps", "2", "--output", str(output)]) == 0
    assert f"wrote {output}: 9 frames 64x64 at 24 fps" in capsys.readouterr().out
    with av.open(str(output)) as container:
        video, audio = container.streams.video[0], container.streams.audio[0]
        assert (video.codec_context.width, video.codec_context.height, video.frames) == (SIZE, SIZE, FRAMES)
        assert float(video.average_rate) == FPS and audio.channels == 2


def test_a_file_with_sound_needs_replace_sound(tmp_path, capsys):
    loud = write_video(tmp_path / "loud.mp4", sound=True)
    assert video_info(loud).has_sound
    assert main(["--video", str(loud), "--output", str(tmp_path / "x.mp4")]) == 2
    assert "already has sound" in capsys.readouterr().err and not (tmp_path / "x.mp4").exists()
    assert main(["--video", str(loud), "--replace-sound", "--mode", "distilled", "--output",
                 str(tmp_path / "x.mp4")]) == 0
    with av.open(str(tmp_path / "x.mp4")) as container:
        assert container.streams.audio[0].rate != 44100  # the generated sound at the vocoder's rate, not the file's


@pytest.mark.parametrize("kind, match", BAD)
def test_every_bad_file_exits_2_before_model_work(kind, match, tmp_path, capsys):
    path = _bad_video(kind, tmp_path)
    assert main(["--video", str(path), "--output", str(tmp_path / "x.mp4")]) == 2
    captured = capsys.readouterr()
    assert match in captured.err, captured.err
    assert "loaded in" not in captured.out and not (tmp_path / "x.mp4").exists()


@pytest.mark.parametrize("extra, match", [
    (["--width", "96"], "--width 96 differs from the video's 64"),
    (["--fps", "25"], "--fps 25 differs from the video's 24"),
    (["--mode", "two-stage"], "use mode one-stage"),
    (["--image", "x.png"], "takes no image or audio condition"),
    (["--replace-sound"], None),
])
def test_bad_settings_with_a_video_exit_2_before_model_work(clip, tmp_path, capsys, extra, match):
    argv = ["--video", str(clip), "--output", str(tmp_path / "x.mp4")] + extra
    if match is None:  # --replace-sound on a silent file changes nothing; without --video it is refused
        assert main(["--replace-sound", "--output", str(tmp_path / "x.mp4")]) == 2
        assert "--replace-sound goes with --video" in capsys.readouterr().err
        return
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert match in captured.err, captured.err
    assert "loaded in" not in captured.out and not (tmp_path / "x.mp4").exists()
