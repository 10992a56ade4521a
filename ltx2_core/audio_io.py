"""Reading a sound to condition a generation on (a clip of an audio or video file, or a waveform in memory), as the
reference reads it (`ltx_pipelines.utils.media_io.decode_audio_from_file`): PyAV, the first audio stream, decoded
from the frame that ends after `start` to the one that starts after `start + duration`, as float in [-1, 1] at the
file's own rate, then cut sample-exactly to [start, start + duration).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np
import torch

# the integer sample formats' full scale (planar or not), as the reference divides them
_INT_FORMAT_MAX = {"s16": 32768.0, "s16p": 32768.0, "s32": 2147483648.0, "s32p": 2147483648.0, "u8": 128.0,
                   "u8p": 128.0}


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


def _frame_to_float(frame) -> np.ndarray:
    """An audio frame -> (channels, samples) float32, integer formats scaled to [-1, 1]."""
    array = frame.to_ndarray().astype(np.float32)
    name = frame.format.name
    if name in _INT_FORMAT_MAX:
        array = array / _INT_FORMAT_MAX[name]
        if name.startswith("u8"):
            array = array - 1.0
    if not frame.format.is_planar:  # interleaved: (1, samples · channels)
        array = array.reshape(-1, len(frame.layout.channels)).T
    return array


def read_audio(path: str | os.PathLike, start: float = 0.0, duration: float | None = None) -> Waveform:
    """The first audio stream of `path` from `start` seconds for `duration` seconds (None: to the end)."""
    import av

    with av.open(os.fspath(path)) as container:
        stream = next(s for s in container.streams if s.type == "audio")
        end = start + duration if duration is not None else float("inf")
        container.seek(int(start / stream.time_base), stream=stream)
        chunks, first_time = [], None
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            time = float(frame.pts * stream.time_base)
            if time + frame.samples / frame.sample_rate < start:
                continue
            if time > end:
                break
            first_time = time if first_time is None else first_time
            chunks.append(_frame_to_float(frame))
        rate = stream.rate
    samples = torch.from_numpy(np.concatenate(chunks, axis=-1))
    skip = max(round((start - first_time) * rate), 0)
    samples = samples[:, skip:]
    if duration is not None:
        samples = samples[:, :round(duration * rate)]
    return Waveform(samples.contiguous(), int(rate))
