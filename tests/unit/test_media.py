"""mp4 writing: exact frame rates and durations read back with PyAV, AAC stereo audio, and no partial files."""

from __future__ import annotations

from fractions import Fraction

import av
import pytest
import torch

from ltx2_core import media
from ltx2_core.errors import NonFiniteError
from ltx2_core.media import write_mp4

SIZE = 64


def _frames(count: int = 9, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(F, 64, 64, 3) frames with a moving gradient, so the encoder has real content."""
    ramp = torch.linspace(0, 1, SIZE)
    image = torch.stack([ramp[None, :].expand(SIZE, SIZE), ramp[:, None].expand(SIZE, SIZE),
                         torch.full((SIZE, SIZE), 0.5)], dim=-1)
    frames = torch.stack([image.roll(i, dims=1) for i in range(count)])
    return (frames * 255).round().to(torch.uint8) if dtype == torch.uint8 else frames.to(dtype)


def _tone(seconds: Fraction, sample_rate: int, channels: int = 2) -> torch.Tensor:
    """(channels, S) 440 Hz sine at half amplitude, S = seconds · sample_rate."""
    t = torch.arange(int(seconds * sample_rate)) / sample_rate
    return (0.5 * torch.sin(2 * torch.pi * 440 * t)).expand(channels, -1).clone()


def _info(path) -> dict:
    with av.open(str(path)) as container:
        video = container.streams.video[0]
        info = {"fps": video.average_rate, "frames": sum(1 for _ in container.decode(video=0)),
                "duration": video.duration * video.time_base, "codec": video.codec_context.name,
                "pix_fmt": video.codec_context.pix_fmt, "size": (video.codec_context.width,
                                                                video.codec_context.height)}
        if container.streams.audio:
            audio = container.streams.audio[0]
            info.update(audio_codec=audio.codec_context.name, channels=audio.channels, sample_rate=audio.rate,
                        audio_duration=audio.duration * audio.time_base)
    return info


def _listing(folder) -> set[str]:
    return {p.name for p in folder.iterdir()}


@pytest.mark.parametrize("fps", [24, 25, Fraction(30000, 1001), 30000 / 1001, 24.0])
def test_frame_rate_and_duration_are_exact(tmp_path, fps):
    path = write_mp4(tmp_path / "v.mp4", _frames(9), fps)
    info = _info(path)
    expected = Fraction(30000, 1001) if fps == 30000 / 1001 else Fraction(fps)
    assert info["fps"] == expected and isinstance(info["fps"], Fraction)
    assert info["frames"] == 9 and info["duration"] == 9 / expected
    assert (info["codec"], info["pix_fmt"], info["size"]) == ("h264", "yuv420p", (SIZE, SIZE))
    assert _listing(tmp_path) == {"v.mp4"}


@pytest.mark.parametrize("sample_rate", [24000, 48000])
@pytest.mark.parametrize("channels", [1, 2])
def test_audio_is_aac_stereo_at_the_given_rate(tmp_path, sample_rate, channels):
    fps, count = Fraction(24), 17
    audio = _tone(count / fps, sample_rate, channels)
    info = _info(write_mp4(tmp_path / "av.mp4", _frames(count), fps, audio, sample_rate))
    assert info["frames"] == count and info["fps"] == fps
    assert (info["audio_codec"], info["channels"], info["sample_rate"]) == ("aac", 2, sample_rate)
    # the edit list removes the AAC priming, so the audio lasts exactly as long as the samples given
    assert info["audio_duration"] == Fraction(audio.shape[1], sample_rate)
    assert abs(info["audio_duration"] - info["duration"]) < Fraction(1, sample_rate)


def test_ntsc_video_with_audio(tmp_path):
    fps = Fraction(30000, 1001)
    info = _info(write_mp4(tmp_path / "ntsc.mp4", _frames(13), fps, _tone(13 / fps, 48000), 48000))
    assert info["fps"] == fps and info["frames"] == 13 and info["duration"] == Fraction(13 * 1001, 30000)
    assert abs(info["audio_duration"] - info["duration"]) < Fraction(1, 48000)


def test_movie_timescale_makes_both_durations_whole():
    assert media._timescale_option(Fraction(30000, 1001), 48000) == {"movie_timescale": "240000"}
    assert media._timescale_option(Fraction(24), None) == {"movie_timescale": "24"}
    # too large for the muxer's 32-bit field: its default (milliseconds) is kept
    assert media._timescale_option(Fraction(1000999, 1001), 48000) == {}


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float16, torch.bfloat16, torch.float64])
def test_other_frame_dtypes(tmp_path, dtype):
    assert _info(write_mp4(tmp_path / "v.mp4", _frames(3, dtype), 25))["frames"] == 3


def test_pixels_survive_the_round_trip(tmp_path):
    frames = _frames(3)
    # crf 0 also makes the encoder emit packets while frames are still coming in, so muxing starts mid-stream
    path = write_mp4(tmp_path / "v.mp4", frames, 24, crf=0)
    with av.open(str(path)) as container:
        decoded = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    # yuv420p halves the colour resolution, so only a coarse match is expected even at crf 0
    assert (torch.from_numpy(decoded[1]).float() / 255 - frames[1]).abs().mean() < 0.02


BAD_INPUTS = {
    "frames-not-4d": dict(frames=torch.rand(64, 64, 3)),
    "frames-not-rgb": dict(frames=torch.rand(3, 64, 64, 4)),
    "frames-empty": dict(frames=torch.rand(0, 64, 64, 3)),
    "frames-odd-size": dict(frames=torch.rand(3, 63, 64, 3)),
    "frames-out-of-range": dict(frames=torch.rand(3, 64, 64, 3) * 2),
    "frames-int32": dict(frames=torch.zeros(3, 64, 64, 3, dtype=torch.int32)),
    "frames-numpy": dict(frames=torch.rand(3, 64, 64, 3).numpy()),
    "fps-zero": dict(fps=0),
    "fps-negative": dict(fps=-24),
    "fps-nan": dict(fps=float("nan")),
    "fps-string": dict(fps="24"),
    "audio-no-rate": dict(audio=torch.zeros(2, 100)),
    "audio-bad-rate": dict(audio=torch.zeros(2, 100), sample_rate=12345),
    "audio-3-channels": dict(audio=torch.zeros(3, 100), sample_rate=24000),
    "audio-1d": dict(audio=torch.zeros(100), sample_rate=24000),
    "audio-empty": dict(audio=torch.zeros(2, 0), sample_rate=24000),
    "audio-int16": dict(audio=torch.zeros(2, 100, dtype=torch.int16), sample_rate=24000),
    "audio-clipping": dict(audio=torch.full((2, 100), 1.5), sample_rate=24000),
    "crf-too-high": dict(crf=60),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_inputs_raise_before_any_file_is_created(tmp_path, case):
    arguments = dict(frames=_frames(3), fps=24) | BAD_INPUTS[case]
    with pytest.raises(ValueError):
        write_mp4(tmp_path / "v.mp4", **arguments)
    assert _listing(tmp_path) == set()


NON_FINITE = {
    "frames-nan": dict(frames=torch.full((3, 64, 64, 3), float("nan"))),
    "frames-inf": dict(frames=torch.rand(3, 64, 64, 3).index_fill_(1, torch.tensor([5]), float("inf"))),
    "audio-nan": dict(audio=torch.zeros(2, 100).index_fill_(1, torch.tensor([7]), float("nan")), sample_rate=24000),
}


@pytest.mark.parametrize("case", list(NON_FINITE))
def test_non_finite_values_are_named_as_such_and_not_clamped(tmp_path, case):
    arguments = dict(frames=_frames(3), fps=24) | NON_FINITE[case]
    with pytest.raises(NonFiniteError, match="(NaN|infinite) values") as error:
        write_mp4(tmp_path / "v.mp4", **arguments)
    assert "clamp" not in str(error.value) and "float16" in str(error.value)
    assert _listing(tmp_path) == set()


def test_missing_folder_is_reported(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        write_mp4(tmp_path / "missing" / "v.mp4", _frames(3), 24)
    assert _listing(tmp_path) == set()


def _fail_after(monkeypatch, calls: int) -> None:
    """Makes the frame conversion raise on call `calls` + 1, i.e. in the middle of encoding."""
    convert, seen = media._video_frame, []

    def failing(frame):
        seen.append(1)
        if len(seen) > calls:
            raise RuntimeError("encoder failed")
        return convert(frame)

    monkeypatch.setattr(media, "_video_frame", failing)


def test_failure_mid_encoding_leaves_no_file(tmp_path, monkeypatch):
    _fail_after(monkeypatch, 4)
    with pytest.raises(RuntimeError, match="encoder failed"):
        write_mp4(tmp_path / "v.mp4", _frames(9), 24, _tone(Fraction(9, 24), 24000), 24000)
    assert _listing(tmp_path) == set()


def test_failure_keeps_an_existing_file_untouched(tmp_path, monkeypatch):
    target = tmp_path / "v.mp4"
    target.write_bytes(b"previous video")
    _fail_after(monkeypatch, 4)
    with pytest.raises(RuntimeError):
        write_mp4(target, _frames(9), 24)
    assert target.read_bytes() == b"previous video" and _listing(tmp_path) == {"v.mp4"}


def test_failure_in_the_audio_leaves_no_file(tmp_path, monkeypatch):
    def broken(audio, sample_rate):
        raise RuntimeError("audio encoder failed")

    monkeypatch.setattr(media, "_audio_frame", broken)
    with pytest.raises(RuntimeError, match="audio encoder failed"):
        write_mp4(tmp_path / "v.mp4", _frames(9), 24, _tone(Fraction(9, 24), 24000), 24000)
    assert _listing(tmp_path) == set()


def test_success_replaces_an_existing_file(tmp_path):
    target = tmp_path / "v.mp4"
    target.write_bytes(b"previous video")
    write_mp4(target, _frames(5), 24)
    assert _info(target)["frames"] == 5 and _listing(tmp_path) == {"v.mp4"}


def test_decoded_video_becomes_comfyui_frames_and_an_mp4(tmp_path):
    """(B, 3, F, H, W) in [−1, 1], overshooting a little as decoders do -> (B, F, H, W, 3) in [0, 1] -> mp4."""
    from ltx2_core.media import video_to_frames

    video = torch.linspace(-1.2, 1.2, 2 * 3 * 9 * 32 * 64).reshape(2, 3, 9, 32, 64)
    frames = video_to_frames(video)
    assert frames.shape == (2, 9, 32, 64, 3) and frames.dtype == torch.float32
    assert frames.min() == 0 and frames.max() == 1  # clamped to the bounds themselves
    torch.testing.assert_close(frames[1, 4, 7, 9], (video[1, :, 4, 7, 9].clamp(-1, 1) + 1) / 2)
    with av.open(str(write_mp4(tmp_path / "clip.mp4", frames[0], 24))) as container:
        assert container.streams.video[0].frames == 9
    with pytest.raises(ValueError, match=r"\(B, 3, F, H, W\)"):
        video_to_frames(video[0])
