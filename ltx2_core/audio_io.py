"""Reading a sound to condition a generation on (a clip of an audio or video file, or a waveform in memory), as the
reference reads it (`ltx_pipelines.utils.media_io.decode_audio_from_file`): PyAV, the first audio stream, decoded
from the frame that ends after `start` to the one that starts after `start + duration`, as float in [-1, 1] at the
file's own rate, then cut sample-exactly to [start, start + duration).

Every bad input is refused with a ValueError that names the fix before any model work: a missing, unreadable or
damaged file, one without an audio stream, more than two channels (the audio encoder takes mono or stereo), a start
past the end, no samples, NaN or infinite samples. Where we differ from the reference: unsigned 8-bit audio is
centred (u8 / 128 − 1; the reference's u8 / 128 lies in [0, 2)); a decoder whose frames come at another rate than
the stream header says (HE-AAC) is read at the frames' rate; a missing stream duration reads to the end instead of
failing; a zero duration is refused instead of meaning "to the end".
"""

from __future__ import annotations

import math
import numbers
import os
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

# the integer sample formats' full scale (planar or not), as the reference divides them
_INT_FORMAT_MAX = {"s16": 32768.0, "s16p": 32768.0, "s32": 2147483648.0, "s32p": 2147483648.0, "u8": 128.0,
                   "u8p": 128.0}
MAX_CHANNELS = 2  # the audio VAE encoder takes mono (copied to both sides) or stereo
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class Waveform(NamedTuple):
    """A sound: samples (channels, S) float32 in [-1, 1] on the CPU, at `rate` Hz."""

    samples: torch.Tensor
    rate: int

    @property
    def seconds(self) -> float:
        return self.samples.shape[-1] / self.rate

    def clip(self, start: float, duration: float) -> Waveform:
        """Samples [round(start·rate), + round(duration·rate)), as the reference trims a decoded file."""
        first = round(start * self.rate)
        return self._replace(samples=self.samples[:, first:first + round(duration * self.rate)])

    def checked(self, name: str = "the audio waveform") -> Waveform:
        """This sound as the encoder takes it (samples (C, S) float32 on the CPU, C = 1 or 2, S ≥ 1, finite; rate a
        positive int Hz; (S,) is read as mono), or a ValueError naming the fix."""
        return check_waveform(self.samples, self.rate, name)


def check_waveform(samples, rate, name: str = "the audio waveform") -> Waveform:
    """`samples` ((C, S) or (S,), float, C = 1 or 2; a tensor, a numpy array or nested lists) at `rate` Hz as a
    `Waveform` of float32 (C, S) on the CPU, or a ValueError naming the fix (checked before any model work)."""
    try:
        samples = torch.as_tensor(samples)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise ValueError(f"{name} must be a tensor of samples (channels, S), got {type(samples).__name__}") from exc
    if isinstance(rate, bool) or not isinstance(rate, numbers.Integral) or rate <= 0:
        raise ValueError(f"{name}: the sample rate must be a positive whole number of Hz (e.g. 44100), got {rate!r}")
    if samples.dim() == 1:
        samples = samples[None]
    if samples.dim() != 2 or not 1 <= samples.shape[0] <= MAX_CHANNELS:
        hint = "; for a ComfyUI AUDIO pass waveform[0]" if samples.dim() == 3 else ""
        raise ValueError(f"{name} must be (channels, samples) with 1 (mono) or 2 (stereo) channels, got "
                         f"{tuple(samples.shape)}; downmix other layouts to stereo or mono{hint}")
    if samples.shape[1] == 0:
        raise ValueError(f"{name} has no samples; give a sound at least one sample long")
    if samples.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"{name} must be float in [-1, 1], got {samples.dtype}; scale integer samples to [-1, 1] "
                         "first (16-bit: divide by 32768)")
    samples = samples.detach().to("cpu", torch.float32).contiguous()
    _check_finite(samples, name)
    return Waveform(samples, int(rate))


def _check_finite(samples: torch.Tensor, name: str) -> None:
    if not bool(torch.isfinite(samples).all()):
        nan, inf = int(samples.isnan().sum()), int(samples.isinf().sum())
        raise ValueError(f"{name} has {nan} NaN and {inf} infinite samples of {samples.numel()}; repair the sound "
                         "or re-export it (e.g. as 16-bit PCM: ffmpeg -i IN -c:a pcm_s16le OUT.wav)")


def _frame_to_float(frame) -> np.ndarray:
    """An audio frame -> (channels, samples) float32, integer formats scaled to [-1, 1] (u8 centred)."""
    array = frame.to_ndarray().astype(np.float32)
    name = frame.format.name
    if name in _INT_FORMAT_MAX:
        array = array / _INT_FORMAT_MAX[name]
        if name.startswith("u8"):
            array = array - 1.0
    if not frame.format.is_planar:  # interleaved: (1, samples · channels)
        array = array.reshape(-1, len(frame.layout.channels)).T
    return array


def _check_seconds(value, what: str, allow_zero: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or value < 0 or (value == 0 and not allow_zero):
        bound = "≥ 0" if allow_zero else "> 0"
        raise ValueError(f"audio {what} must be a finite number of seconds {bound}, got {value!r}")
    return float(value)


class _Opened:
    """`av.open(path)` with its first audio stream, every failure a ValueError naming the file and the fix."""

    def __init__(self, path: str | os.PathLike):
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise ValueError(f"an audio file must be given as a path (a non-empty str or Path), got {path!r}")
        self.path = Path(path)
        self.name = f"audio file {self.path}"
        if not self.path.exists():
            raise ValueError(f"{self.name} does not exist; check the path")
        if self.path.is_dir():
            raise ValueError(f"{self.name} is a folder; give an audio file (.wav, .flac, .mp3, .m4a) or a video "
                             "with sound")

    def __enter__(self):
        import av
        from av.error import FFmpegError

        try:
            self.container = av.open(os.fspath(self.path))
        except FFmpegError as exc:
            raise self.unreadable(exc) from exc
        stream = next((s for s in self.container.streams if s.type == "audio"), None)
        if stream is None:
            self.container.close()
            raise ValueError(f"{self.name} has no audio stream; add a sound track or give an audio file")
        if stream.channels > MAX_CHANNELS:
            self.container.close()
            raise ValueError(f"{self.name} has {stream.channels} audio channels and the audio encoder takes 1 "
                             f"(mono) or 2 (stereo); downmix it first, e.g. ffmpeg -i {self.path.name} -ac 2 "
                             "stereo.wav")
        return self.container, stream

    def __exit__(self, *exc_info) -> None:
        self.container.close()

    def unreadable(self, exc: Exception) -> ValueError:
        reason = getattr(exc, "strerror", None) or str(exc)
        return ValueError(f"cannot read {self.name} ({reason}): it is damaged or not a sound PyAV can decode; "
                          f"re-export it, e.g. ffmpeg -i {self.path.name} sound.wav")


def audio_seconds(path: str | os.PathLike) -> float:
    """How long the first audio stream of `path` lasts, in seconds: from the file's header where it says (exact
    for PCM; for compressed formats as the muxer wrote it), else by decoding. ValueError as `read_audio`."""
    import av
    from av.error import FFmpegError

    opened = _Opened(path)
    with opened as (container, stream):
        if stream.duration is not None and stream.time_base is not None:
            return float(stream.duration * stream.time_base)
        if container.duration is not None:
            return container.duration / av.time_base
        try:
            return sum(frame.samples / frame.sample_rate for frame in container.decode(stream))
        except FFmpegError as exc:
            raise opened.unreadable(exc) from exc


def read_audio(path: str | os.PathLike, start: float = 0.0, duration: float | None = None) -> Waveform:
    """The first audio stream of `path` (any format PyAV reads; a video's sound track) from `start` seconds for
    `duration` seconds (None: to the end) -> Waveform (C, S) float32 at the file's own rate, S = round(duration ·
    rate) where the file is long enough (fewer samples where it ends first; the caller decides if that is enough).
    ValueError naming the fix for a bad file or value, before anything is decoded where it can be told."""
    from av.error import FFmpegError

    start = _check_seconds(start, "start", allow_zero=True)
    if duration is not None:
        duration = _check_seconds(duration, "duration", allow_zero=False)
    opened = _Opened(path)
    end = start + duration if duration is not None else math.inf
    with opened as (container, stream):
        try:
            container.seek(int(start / stream.time_base), stream=stream)
            chunks, first_time, rate = [], None, None
            for frame in container.decode(stream):
                if frame.pts is None:
                    continue
                time = float(frame.pts * stream.time_base)
                if time + frame.samples / frame.sample_rate < start:
                    continue
                if time > end:
                    break
                chunk = _frame_to_float(frame)
                if first_time is None:
                    first_time, rate, channels = time, frame.sample_rate, chunk.shape[0]
                elif (frame.sample_rate, chunk.shape[0]) != (rate, channels):
                    raise ValueError(f"{opened.name} changes from {channels} channels at {rate} Hz to "
                                     f"{chunk.shape[0]} at {frame.sample_rate} Hz mid-stream; re-export it, e.g. "
                                     f"ffmpeg -i {opened.path.name} sound.wav")
                chunks.append(chunk)
        except FFmpegError as exc:
            raise opened.unreadable(exc) from exc
    total = sum(chunk.shape[-1] for chunk in chunks)
    skip = max(round((start - first_time) * rate), 0) if chunks else 0
    if total - skip <= 0:
        length = first_time + total / rate if chunks else audio_seconds(path)
        if start == 0 or length <= 0:
            raise ValueError(f"{opened.name} holds no audio samples; give a file with sound")
        raise ValueError(f"{opened.name} lasts {length:.3f} s, so a start at {start:g} s is past its end; give a "
                         f"start below {length:.3f} s")
    samples = torch.from_numpy(np.concatenate(chunks, axis=-1))[:, skip:]
    if duration is not None:
        samples = samples[:, :round(duration * rate)]
        if samples.shape[1] == 0:
            raise ValueError(f"audio duration {duration:g} s is shorter than one sample at {rate} Hz; give a "
                             "longer duration")
    samples = samples.contiguous()
    _check_finite(samples, opened.name)
    return Waveform(samples, int(rate))
