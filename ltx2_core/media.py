"""Writing generated video (and its audio) to an mp4 file: H.264 yuv420p video and AAC stereo audio, via PyAV; and
audio alone (`write_audio`: 16-bit PCM .wav, lossless .flac, or AAC .m4a / .mp4), always stereo.

Every input is checked before a file is created, and `check_target` lets a caller check the target (its folder, its
name's format) before the work that produces the input. The file is written under a temporary name in the target
folder and renamed onto the target only when complete, so a failure never leaves a partial file or touches an
existing one.
"""

from __future__ import annotations

import math
import numbers
import os
import secrets
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import torch

from ltx2_core.errors import NonFiniteError

# a float frame rate is read as the nearest fraction with a denominator up to 1001, so 29.97002997 -> 30000/1001
FPS_MAX_DENOMINATOR = 1001
MAX_CRF = 51  # the H.264 quality scale: 0 lossless .. 51 worst
MAX_TIMESCALE = 2**31 - 1  # the mp4 muxer's movie_timescale is a 32-bit int
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
FLAC_MAX_RATE = 655350  # the most FLAC's stream header can state
# audio-only files by extension: (muxer, encoder, what it is)
VIDEO_SUFFIXES = (".mp4",)  # the one container `write_mp4` writes, whatever the name says
AUDIO_FILES = {".wav": ("wav", "pcm_s16le", "16-bit PCM"), ".flac": ("flac", "flac", "16-bit lossless FLAC"),
               ".m4a": ("mp4", "aac", "AAC"), ".mp4": ("mp4", "aac", "AAC")}


def video_to_frames(video: torch.Tensor) -> torch.Tensor:
    """Decoded video (B, 3, F, H, W) in [−1, 1] -> frames (B, F, H, W, 3) float32 in [0, 1] (ComfyUI IMAGE rows).

    Values are clamped: a decoder's output may overshoot [−1, 1] slightly.
    """
    if video.dim() != 5 or video.shape[1] != 3:
        raise ValueError(f"video must be (B, 3, F, H, W) as the VAE decoder returns it, got {tuple(video.shape)}")
    return video.permute(0, 2, 3, 4, 1).float().add(1).div_(2).clamp_(0, 1)


def write_mp4(
    path: str | os.PathLike,
    frames: torch.Tensor,
    fps: float | Fraction,
    audio: torch.Tensor | None = None,
    sample_rate: int | None = None,
    *,
    crf: int = 18,
) -> Path:
    """Writes `frames` (F, H, W, 3), float in [0, 1] (ComfyUI IMAGE) or uint8, at exactly `fps` frames per second.

    `audio` is (2, S) or (1, S) float in [-1, 1] at `sample_rate` Hz (LTX-2.0: 24000, 2.3: 48000); mono is
    written as two equal channels, as long as given (not cut or padded to the video). H and W must be even
    (yuv420p halves the colour planes); odd sizes are an error rather than a silent pad or crop. Errors in the
    inputs are raised before any file is created. Returns the path written.
    """
    target = Path(path)
    rate = _check_fps(fps)
    _check_frames(frames)
    if audio is not None:
        _check_audio(audio, sample_rate)
    _check_output(target, crf)
    return _write_atomically(target, lambda partial: _encode(partial, frames, rate, crf, audio, sample_rate))


def write_audio(path: str | os.PathLike, audio: torch.Tensor, sample_rate: int) -> Path:
    """Writes `audio` (2, S) or (1, S) float in [-1, 1] at `sample_rate` Hz alone, in the format its extension
    names: .wav 16-bit PCM (as the reference's `encode_audio`), .flac 16-bit lossless, .m4a / .mp4 AAC. Always
    stereo (mono as two equal channels, as `write_mp4`); 16-bit samples are round(x · 32768) clipped to
    [−32768, 32767], the inverse of how readers scale them (the reference truncates x · 32767, up to 2 steps off).
    Errors in the inputs are raised before any file is created. Returns the path written.
    """
    target = Path(path)
    kind = AUDIO_FILES.get(target.suffix.lower())
    if kind is None:
        names = ", ".join(f"{ext} ({what})" for ext, (_, _, what) in AUDIO_FILES.items())
        raise ValueError(f"cannot tell the audio format of {target.name!r}; end the file name in one of {names}")
    muxer, codec, _ = kind
    _check_audio(audio, sample_rate, codec)
    _check_target(target)
    return _write_atomically(target, lambda partial: _encode_audio(partial, muxer, codec, audio, sample_rate))


def _write_atomically(target: Path, encode) -> Path:
    """`encode(partial)` writes a temporary file beside `target`, renamed onto it only when complete."""
    partial = target.with_name(f".{target.name}.{secrets.token_hex(4)}.partial")
    try:
        encode(partial)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return target


def _check_fps(fps: float | Fraction) -> Fraction:
    """The frame rate as an exact positive fraction."""
    if isinstance(fps, bool) or not isinstance(fps, numbers.Real) or not math.isfinite(fps) or fps <= 0:
        raise ValueError(f"fps must be a positive number (e.g. 24, 25 or Fraction(30000, 1001)), got {fps!r}")
    if isinstance(fps, numbers.Rational):
        return Fraction(fps.numerator, fps.denominator)
    return Fraction(fps).limit_denominator(FPS_MAX_DENOMINATOR)


def _check_frames(frames: torch.Tensor) -> None:
    """(F, H, W, 3) uint8 or float in [0, 1], F ≥ 1, H and W even."""
    if not isinstance(frames, torch.Tensor) or frames.dim() != 4 or frames.shape[-1] != 3:
        shape = tuple(frames.shape) if isinstance(frames, torch.Tensor) else type(frames).__name__
        raise ValueError(f"frames must be a (F, H, W, 3) RGB tensor (ComfyUI IMAGE layout), got {shape}")
    count, height, width, _ = frames.shape
    if count == 0 or height == 0 or width == 0:
        raise ValueError(f"frames {tuple(frames.shape)} hold no pixels; there is nothing to write")
    if height % 2 or width % 2:
        raise ValueError(f"frame size {width}x{height} must be even in both dimensions for H.264 yuv420p; crop or "
                         "pad the frames by one pixel (LTX-2 sizes are multiples of 32)")
    if frames.dtype in FLOAT_DTYPES:
        _check_range("frames", frames, 0.0, 1.0)
    elif frames.dtype != torch.uint8:
        raise ValueError(f"frames must be float in [0, 1] or uint8, got {frames.dtype}")


def aac_sample_rates() -> tuple[int, ...]:
    """The sample rates an mp4's AAC sound can have (FFmpeg's encoder's list)."""
    return tuple(sorted(av.Codec("aac", "w").audio_rates or ()))


def _check_audio(audio: torch.Tensor, sample_rate: int | None, codec: str = "aac") -> None:
    """(1 or 2, S) float in [-1, 1], S ≥ 1, at a sample rate `codec` supports."""
    if not isinstance(audio, torch.Tensor) or audio.dim() != 2 or audio.shape[0] not in (1, 2) or audio.shape[1] == 0:
        shape = tuple(audio.shape) if isinstance(audio, torch.Tensor) else type(audio).__name__
        raise ValueError(f"audio must be a (channels, samples) tensor with 1 or 2 channels and at least one sample, "
                         f"got {shape}; for a ComfyUI AUDIO dict pass waveform[0]")
    if audio.dtype not in FLOAT_DTYPES:
        raise ValueError(f"audio must be a float tensor in [-1, 1], got {audio.dtype}")
    if codec == "aac":
        rates = aac_sample_rates()
        if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate not in rates:
            raise ValueError(f"sample_rate must be given with the audio and be one AAC supports (LTX-2.0: 24000, "
                             f"LTX-2.3: 48000; any of {sorted(rates)}), got {sample_rate!r}")
    elif isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or not 0 < sample_rate <= FLAC_MAX_RATE:
        raise ValueError(f"sample_rate must be given with the audio as a whole number of Hz in [1, {FLAC_MAX_RATE}] "
                         f"(LTX-2.0: 24000, LTX-2.3: 48000), got {sample_rate!r}")
    _check_range("audio", audio, -1.0, 1.0)


def _check_range(name: str, values: torch.Tensor, low: float, high: float) -> None:
    if not bool(torch.isfinite(values).all()):  # no clamp repairs these: they come from the model, not from rounding
        nan, inf = int(values.isnan().sum()), int(values.isinf().sum())
        raise NonFiniteError(f"{name}: {nan} NaN and {inf} infinite values of {values.numel()}, so the model produced "
                             "no valid output (damaged weights, or a float16 run that overflowed: use bfloat16 or "
                             "float32); nothing was written")
    lo, hi = (bound.item() for bound in torch.aminmax(values))
    if not (lo >= low and hi <= high):
        raise ValueError(f"{name} values must lie in [{low:g}, {high:g}], found [{lo:g}, {hi:g}]; clamp them first")


def _check_output(target: Path, crf: int) -> None:
    if isinstance(crf, bool) or not isinstance(crf, int) or not 0 <= crf <= MAX_CRF:
        raise ValueError(f"crf must be an integer in [0, {MAX_CRF}] (lower = better quality), got {crf!r}")
    _check_target(target)


def check_target(path: str | os.PathLike, suffixes: tuple[str, ...], what: str) -> Path:
    """`path` as a Path once `what` (e.g. "an MP4 (H.264 + AAC)") can be written there; ValueError naming the fix
    otherwise: a folder, a name not ending in one of `suffixes` (the writers pick the container by it, or write only
    one), a missing folder, or a folder no file can be created in (a probe file is created beside the target and
    removed at once, as the writers create their temporary file there). For a caller to run before any expensive
    work."""
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"{target} is a folder; name a file in it, e.g. {target / ('output' + suffixes[0])}")
    if not target.name.lower().endswith(suffixes):
        raise ValueError(f"the file is written as {what}: end its name in {' or '.join(suffixes)}, e.g. "
                         f"{target.with_suffix(suffixes[0]).name}")
    if not target.parent.is_dir():
        raise ValueError(f"folder {target.parent} does not exist; create it or pick another place")
    probe = target.with_name(f".{target.name}.{secrets.token_hex(4)}.probe")
    try:
        probe.touch(exist_ok=False)
        probe.unlink()
    except OSError as exc:
        raise ValueError(f"cannot write in {target.parent} ({exc.strerror or exc}); pick a folder you can write "
                         "to") from None
    return target


def _check_target(target: Path) -> None:
    if not target.parent.is_dir():
        raise FileNotFoundError(f"output folder {target.parent} does not exist; create it first")
    if target.is_dir():
        raise IsADirectoryError(f"{target} is a folder; give a file name such as {target / 'video.mp4'}")


def _encode(
    path: Path, frames: torch.Tensor, rate: Fraction, crf: int, audio: torch.Tensor | None, sample_rate: int | None
) -> None:
    """The whole mp4; both streams are added before the first packet, since the header is written then."""
    options = _timescale_option(rate, sample_rate if audio is not None else None)
    with av.open(str(path), "w", format="mp4", options=options) as container:
        video = _video_stream(container, frames, rate, crf)
        sound = None if audio is None else container.add_stream("aac", rate=sample_rate, layout="stereo")
        # not `video.time_base`: the muxer changes that to the mp4 timescale once it writes the header
        frame_time = 1 / rate
        for index, frame in enumerate(frames):
            picture = _video_frame(frame)
            picture.pts, picture.time_base = index, frame_time
            container.mux(video.encode(picture))
        container.mux(video.encode())  # flush the encoder's delayed frames
        if sound is not None:
            _mux_aac(container, sound, audio, sample_rate)


def _encode_audio(path: Path, muxer: str, codec: str, audio: torch.Tensor, sample_rate: int) -> None:
    """An audio-only file: AAC as in `write_mp4` (movie timescale = sample rate, so the duration is exact), PCM and
    FLAC from 16-bit samples."""
    options = {"movie_timescale": str(sample_rate)} if muxer == "mp4" else {}
    with av.open(str(path), "w", format=muxer, options=options) as container:
        sound = container.add_stream(codec, rate=sample_rate, layout="stereo")
        if codec == "aac":
            _mux_aac(container, sound, audio, sample_rate)
            return
        sound.codec_context.format = "s16"
        container.mux(sound.encode(_s16_frame(audio, sample_rate)))
        container.mux(sound.encode())


def _mux_aac(container: av.container.OutputContainer, sound: av.audio.stream.AudioStream, audio: torch.Tensor,
             sample_rate: int) -> None:
    container.mux(sound.encode(_audio_frame(audio, sample_rate)))
    container.mux(sound.encode())  # flush the encoder's delayed frames


def _timescale_option(rate: Fraction, sample_rate: int | None) -> dict[str, str]:
    """An mp4 movie timescale in which both durations, F / rate and S / sample_rate, are whole numbers.

    The edit lists (B-frame delay, AAC priming) give track durations in the movie timescale; the default 1000 rounds
    them to milliseconds (9 frames at 30000/1001 would last 0.300 s instead of 0.3003 s).
    """
    scale = math.lcm(rate.numerator, sample_rate or 1)
    return {"movie_timescale": str(scale)} if scale <= MAX_TIMESCALE else {}


def _video_stream(
    container: av.container.OutputContainer, frames: torch.Tensor, rate: Fraction, crf: int
) -> av.video.stream.VideoStream:
    """H.264 yuv420p; time base 1/rate and pts = frame index, so the duration is exactly F / rate."""
    stream = container.add_stream("libx264", rate=rate, options={"crf": str(crf)})
    stream.height, stream.width = frames.shape[1], frames.shape[2]
    stream.pix_fmt = "yuv420p"
    stream.time_base = 1 / rate
    return stream


def _video_frame(frame: torch.Tensor) -> av.VideoFrame:
    """(H, W, 3) float in [0, 1] or uint8, on any device -> an rgb24 frame (converted one frame at a time)."""
    if frame.dtype != torch.uint8:
        frame = (frame.float() * 255).round().to(torch.uint8)
    return av.VideoFrame.from_ndarray(np.ascontiguousarray(frame.cpu().numpy()), format="rgb24")


def _audio_frame(audio: torch.Tensor, sample_rate: int) -> av.AudioFrame:
    """(1 or 2, S) -> one planar stereo frame; the encoder cuts it into AAC's 1024-sample frames."""
    samples = audio.detach().float().cpu().expand(2, -1).contiguous().numpy()
    frame = av.AudioFrame.from_ndarray(samples, format="fltp", layout="stereo")
    frame.sample_rate, frame.pts = sample_rate, 0
    return frame


def _s16_frame(audio: torch.Tensor, sample_rate: int) -> av.AudioFrame:
    """(1 or 2, S) float in [-1, 1] -> one interleaved stereo s16 frame, round(x · 32768) clipped to int16."""
    stereo = audio.detach().double().cpu().expand(2, -1).numpy()
    ints = np.clip(np.round(stereo * 32768), -32768, 32767).astype(np.int16)
    frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(ints.T).reshape(1, -1), format="s16", layout="stereo")
    frame.sample_rate, frame.pts = sample_rate, 0
    return frame
