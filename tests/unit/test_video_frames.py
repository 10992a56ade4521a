"""A video as frames in memory (`video_io.VideoFrames`, ComfyUI's IMAGE layout: (F, H, W, 3) float in [0, 1]) is read
exactly as the file it was decoded from: the same pixels for the encoder, the same encoded control and the same
retake (video and sound), and bad frames are refused naming the fix before any model work."""

from __future__ import annotations

import av
import pytest
import torch
from unit.test_video_to_audio import FPS, FRAMES, SIZE, write_video

from ltx2_core.audio_io import Waveform, read_audio
from ltx2_core.conditioning import ControlCondition, Retake, encode_retake
from ltx2_core.conditioning.control import encode_control
from ltx2_core.demo.models import demo_models
from ltx2_core.pipeline import Request
from ltx2_core.video_io import VideoFrames, check_video_file, read_video, video_info

# frames x 255 of an 8-bit value divided by 255 comes back within float32 rounding (≤ 3e-5 of 255, 2.4e-7 in [-1, 1])
ATOL = 1e-5


@pytest.fixture(scope="module")
def models():
    return demo_models("2.3")


@pytest.fixture(scope="module")
def loud(tmp_path_factory):
    return write_video(tmp_path_factory.mktemp("frames") / "loud.mp4", sound=True)


def decoded(path) -> VideoFrames:
    """The file's frames as ComfyUI's Load Video gives an 8-bit RGB stream: uint8 / 255, (F, H, W, 3)."""
    with av.open(str(path)) as container:
        frames = [torch.from_numpy(f.to_ndarray(format="rgb24")) for f in container.decode(video=0)]
        fps = float(container.streams.video[0].average_rate)
    return VideoFrames(torch.stack(frames).float() / 255.0, fps)


def test_frames_read_as_their_file_at_its_size_and_resized(loud):
    frames = decoded(loud)
    assert video_info(frames) == video_info(loud)._replace(has_sound=False)
    assert check_video_file(frames) == video_info(frames)
    for size in ((None, None), (32, 32), (32, 64)):
        torch.testing.assert_close(read_video(frames, *size), read_video(loud, *size), atol=ATOL, rtol=0)
    torch.testing.assert_close(read_video(frames, start=1 / FPS, frames=1), read_video(loud, start=1 / FPS, frames=1),
                               atol=ATOL, rtol=0)


def test_a_control_of_frames_encodes_as_its_file(models, loud):
    frames = decoded(loud)
    for downscale in (1, 2):
        from_file = ControlCondition(loud, 0.8, downscale)
        in_memory = ControlCondition(frames, 0.8, downscale)
        assert in_memory.check(FRAMES, ((SIZE, SIZE),)) == from_file.check(FRAMES, ((SIZE, SIZE),))._replace(
            has_sound=False)
        want = encode_control(from_file, models.video_encoder, FRAMES, SIZE, SIZE)
        got = encode_control(in_memory, models.video_encoder, FRAMES, SIZE, SIZE)
        assert (got.strength, got.downscale) == (want.strength, want.downscale)
        torch.testing.assert_close(got.latent, want.latent, atol=ATOL, rtol=0)


def test_a_retake_of_frames_and_their_sound_encodes_as_its_file(models, loud):
    frames, sound = decoded(loud), read_audio(loud)
    from_file, in_memory = Retake(loud, 0.1, 0.3), Retake(frames, 0.1, 0.3, sound=sound)
    assert in_memory.check() == from_file.check() == in_memory.info()
    want = encode_retake(from_file, models.video_encoder, models.audio_encoder, from_file.info())
    got = encode_retake(in_memory, models.video_encoder, models.audio_encoder, in_memory.info())
    torch.testing.assert_close(got[0].latent, want[0].latent, atol=ATOL, rtol=0)
    torch.testing.assert_close(got[1].latent, want[1].latent, atol=ATOL, rtol=0)  # the same samples: exact in fp32
    assert (got[0].span, got[1].span) == (want[0].span, want[1].span) == ((0.1, 0.3), (0.1, 0.3))
    silent = Retake(frames, 0.1, 0.3)
    assert not silent.info().has_sound and encode_retake(silent, models.video_encoder, None, silent.info())[1] is None
    request = Request("a dog barks", width=SIZE, height=SIZE, frames=FRAMES, fps=float(FPS), retake=in_memory)
    request.check()


@pytest.mark.parametrize("pixels, fps, match", [
    (torch.zeros(0, SIZE, SIZE, 3), 24.0, r"is empty; give at least one frame"),
    (torch.zeros(9, SIZE, SIZE), 24.0, r"must be \(frames, height, width, 3\) RGB.*got \(9, 64, 64\)"),
    (torch.zeros(9, SIZE, SIZE, 3, dtype=torch.uint8), 24.0, r"must be float in \[0, 1\].*scale 8-bit"),
    (torch.full((9, SIZE, SIZE, 3), 2.0), 24.0, r"values in \[2, 2\].*floats in \[0, 1\]"),
    (torch.full((9, SIZE, SIZE, 3), float("nan")), 24.0, r"floats in \[0, 1\]"),
    (torch.zeros(9, SIZE, SIZE, 3), 0.0, r"frame rate must be a positive number"),
])
def test_bad_frames_are_refused_naming_the_fix(pixels, fps, match):
    with pytest.raises(ValueError, match=match):
        video_info(VideoFrames(pixels, fps))


@pytest.mark.parametrize("shape, match", [
    ((9, 48, 64, 3), r"9x48x64.*is 64x48; width and height must be multiples of 32: crop or scale the frames first, "
                     r"e.g. to 64x32"),
    ((12, 64, 64, 3), r"has 12 frames; the frame count must be 8k\+1.*keep the first 9"),
    ((5, 64, 64, 3), r"has 5 frame\(s\).*at least 9"),
])
def test_frames_a_clip_cannot_hold_are_refused(shape, match):
    with pytest.raises(ValueError, match=match):
        check_video_file(VideoFrames(torch.zeros(shape), 24.0))


def test_bad_control_frames_and_retakes_are_refused(loud):
    frames = VideoFrames(torch.zeros(9, SIZE, SIZE, 3), 24.0)
    with pytest.raises(ValueError, match=r"control video frames \(9x64x64.*has 9 frames and the clip 17; the control "
                                         r"needs at least as many frames as the clip \(its first 17 are used\)"):
        ControlCondition(frames).check(17, ((SIZE, SIZE),))
    with pytest.raises(ValueError, match=r"a file's own sound track.*give `sound` only with frames"):
        Retake(loud, 0.1, 0.3, sound=read_audio(loud)).check()
    with pytest.raises(ValueError, match=r"span ends at 0.5 s and video frames \(9x64x64.*lasts 0.375 s"):
        Retake(frames, 0.1, 0.5).check()
    with pytest.raises(ValueError, match=r"span \[0.3, 0.3\) s is empty"):
        Retake(frames, 0.3, 0.3).check()
    with pytest.raises(ValueError, match=r"the sound of retake of video frames.*no samples"):
        Retake(frames, 0.1, 0.3, sound=Waveform(torch.zeros(1, 0), 16000)).check()
    with pytest.raises(ValueError, match=r"keeps both the video and the audio"):
        Retake(frames, 0.1, 0.3, False, False, sound=Waveform(torch.zeros(1, 800), 16000)).check()


def test_a_float_decoders_slight_overshoot_is_clamped_as_an_8_bit_decode_clamps_it():
    """ComfyUI's Load Video decodes most H.264 as float RGB, which may stray a little outside [0, 1]: within 0.1 it
    reads as the clamped frames; further out it is refused as another scale."""
    pixels = torch.rand(9, 64, 64, 3, generator=torch.Generator().manual_seed(0)) * 1.16 - 0.08
    torch.testing.assert_close(read_video(VideoFrames(pixels, 24.0)), read_video(VideoFrames(pixels.clamp(0, 1), 24.0)),
                               atol=0, rtol=0)
    with pytest.raises(ValueError, match=r"floats in \[0, 1\]"):
        video_info(VideoFrames(pixels * 255, 24.0))
