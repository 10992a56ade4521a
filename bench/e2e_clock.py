"""The clock of `bench/end_to_end.py`: the wall time and peak device memory of each part of a run, and each step's
time, taken around the pipeline's own calls.

A part ends at a mark: the device is synchronised, the host clock read and the device's peak memory read and reset.
Marks sit only between parts (a stage's start and end, the audio decoder's first call), never inside a step. Steps
are timed without a sync: a CUDA event is recorded on the stream at each step's progress call (the host clock on the
CPU) and the intervals read once the run is over.
"""

from __future__ import annotations

import itertools
import statistics
import time
from dataclasses import replace

import torch

from ltx2_core.pipeline import LocalSampler

GIB = 2**30


class Clock:
    def __init__(self, device: torch.device) -> None:
        self.device, self.cuda = device, device.type == "cuda"
        self.parts: dict[str, float] = {}
        self.peaks: dict[str, float] = {}
        self.ticks: dict[str, list] = {}  # per stage: its start and each step's end (CUDA events or host seconds)
        self.last = self._now()

    def _now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def resume(self) -> None:
        """Starts the next part here (what ran since the last mark, e.g. building models, is not a part)."""
        self.last = self._now()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)

    def mark(self, part: str) -> None:
        """Ends `part` (seconds since the last mark or resume; added up if the part comes again)."""
        now = self._now()
        self.parts[part] = self.parts.get(part, 0.0) + now - self.last
        if self.cuda:
            peak = torch.cuda.max_memory_allocated(self.device) / GIB
            self.peaks[part] = max(self.peaks.get(part, 0.0), peak)
            torch.cuda.reset_peak_memory_stats(self.device)
        self.last = now

    def tick(self, stage: str) -> None:
        """A point in `stage` (its start, then each step's end), without a sync."""
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
        else:
            event = time.perf_counter()
        self.ticks.setdefault(stage, []).append(event)

    def progress(self, stage: str, done: int, total: int) -> None:
        """A `pipeline.StageProgress`: one tick per step."""
        self.tick(stage)

    def step_times(self) -> dict[str, dict]:
        """Per stage: its steps, the first step's seconds (from the stage's start: LoRA fusion, set-up and, with
        CUDA graphs, the capture) and the median of the others."""
        out = {}
        for stage, ticks in self.ticks.items():
            if self.cuda:
                gaps = [a.elapsed_time(b) / 1e3 for a, b in itertools.pairwise(ticks)]
            else:
                gaps = [b - a for a, b in itertools.pairwise(ticks)]
            out[stage] = {"steps": len(gaps), "first_step_s": round(gaps[0], 4) if gaps else None,
                          "median_step_s": round(statistics.median(gaps[1:]), 4) if len(gaps) > 1 else None}
        return out


class TimedSampler:
    """A `pipeline.StageSampler` around `LocalSampler` that marks each stage's start and end on `clock` (the time
    between two stages is the upsampling) and can cut a stage to its first `cut[stage name]` steps."""

    def __init__(self, inner: LocalSampler, clock: Clock, cut: dict[str, int] | None = None) -> None:
        self.inner, self.clock, self.cut = inner, clock, cut or {}
        self.config, self.device = inner.config, inner.device
        self.stages = 0

    def __call__(self, positive, negative, latent, stage, generator, *, progress=None):
        self.stages += 1
        if self.stages > 1:
            self.clock.mark("upsample")  # since the end of the previous stage
        if stage.name in self.cut:
            stage = replace(stage, sigmas=stage.sigmas[: self.cut[stage.name] + 1])
        self.clock.tick(stage.name)
        latent = self.inner(positive, negative, latent, stage, generator, progress=progress)
        self.clock.mark(stage.name)
        return latent
