"""Seam measures of a long clip (`ltx2_core.long_video`): frame-to-frame and audio continuity at the windows' joins
against the same measure inside the windows. Used by tests/unit/test_long_video.py and bench/long_video_seams.py.

A join is where the clip's content passes from one window's new frames to the next's: between the clip's latent
frames j − 1 and j with j = the window's first kept latent frame (pixel frames 8(j−1) and 8(j−1)+1), and between
audio latents k − 1 and k (k its first kept audio latent; the sound's sample (4k − 3)·rate/100, where latent k's mel
frames begin)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ltx2_core.windows import Window

EDGE_FRAMES = 8  # the decoder's first and last pixel frames behave apart (causal start, end): left out of "within"
RMS_MS = 10  # the short-window RMS of the sound (ms)


class Seams(NamedTuple):
    """One measure: its value at each join and its range (min, max) and mean elsewhere."""

    joins: tuple[float, ...]
    low: float
    high: float
    mean: float

    def inside(self, slack: float = 0.0) -> bool:
        """Whether every join lies in [low·(1 − slack), high·(1 + slack)]."""
        return all(self.low * (1 - slack) <= j <= self.high * (1 + slack) for j in self.joins)

    def line(self, unit: str = "") -> str:
        joins = ", ".join(f"{j:.4g}" for j in self.joins)
        return f"joins {joins}{unit}; within {self.low:.4g}..{self.high:.4g} (mean {self.mean:.4g}){unit}"


def _split(steps: torch.Tensor, at: list[int], edge: int = 0) -> Seams:
    """`steps` (N,) a measure between neighbours i, i+1; `at` the joins' indices i; `edge` left out at both ends."""
    inner = torch.ones_like(steps, dtype=torch.bool)
    inner[at] = False
    if edge:
        inner[:edge] = inner[-edge:] = False
    rest = steps[inner]
    return Seams(tuple(float(steps[i]) for i in at), float(rest.min()), float(rest.max()), float(rest.mean()))


def video_latent_seams(video: torch.Tensor, windows: tuple[Window, ...]) -> Seams:
    """Mean |Δ| between neighbouring latent frames of the clip's video latent (1, C, F', H', W')."""
    steps = (video[0, :, 1:] - video[0, :, :-1]).abs().mean(dim=(0, 2, 3))
    return _split(steps, [w.latent_start + w.video_kept - 1 for w in windows[1:]])


def audio_latent_seams(audio: torch.Tensor, windows: tuple[Window, ...]) -> Seams:
    """Mean |Δ| between neighbouring audio latents of the clip's audio latent (1, 8, T, 16)."""
    steps = (audio[0, :, 1:] - audio[0, :, :-1]).abs().mean(dim=(0, 2))
    return _split(steps, [w.audio_start + w.audio_kept - 1 for w in windows[1:]])


def pixel_seams(frames: torch.Tensor, windows: tuple[Window, ...]) -> Seams:
    """Mean |Δ| between neighbouring decoded frames (F, H, W, 3) in [0, 1]; the first and last 8 left out."""
    steps = (frames[1:] - frames[:-1]).abs().mean(dim=(1, 2, 3))
    return _split(steps, [8 * (w.latent_start + w.video_kept - 1) for w in windows[1:]], EDGE_FRAMES)


def audio_join_samples(windows: tuple[Window, ...], rate: int) -> list[int]:
    """The sound's sample index at each join."""
    return [(4 * (w.audio_start + w.audio_kept) - 3) * rate // 100 for w in windows[1:]]


def sound_seams(waveform: torch.Tensor, rate: int, windows: tuple[Window, ...]) -> tuple[Seams, Seams]:
    """(sample-to-sample |Δ|, short-window RMS jump) of a waveform (C, S): at each join the largest within ±1 RMS
    window of it, against every other position (the first and last 100 ms left out)."""
    size = rate * RMS_MS // 1000
    joins = audio_join_samples(windows, rate)
    step = (waveform[:, 1:] - waveform[:, :-1]).abs().mean(dim=0)
    rms = waveform[:, : waveform.shape[1] // size * size].reshape(waveform.shape[0], -1, size).pow(2).mean(dim=(0, 2))
    jump = (rms.sqrt()[1:] - rms.sqrt()[:-1]).abs()
    return _around(step, joins, size, rate // 10), _around(jump, [j // size for j in joins], 1, 10)


def _around(values: torch.Tensor, at: list[int], reach: int, edge: int) -> Seams:
    """Each join's largest value within ±`reach` of it, against the values outside every join's reach and the edges;
    "within" is the same maximum over windows of the same width elsewhere."""
    width = 2 * reach + 1
    pooled = values.unfold(0, width, 1).amax(dim=1)  # pooled[i]: max of values[i .. i + width)
    centres = [a - reach for a in at]
    inner = torch.ones_like(pooled, dtype=torch.bool)
    for c in centres:
        inner[max(c - width, 0):c + width] = False
    inner[:edge] = inner[-edge:] = False
    rest = pooled[inner]
    return Seams(tuple(float(pooled[c]) for c in centres), float(rest.min()), float(rest.max()), float(rest.mean()))
