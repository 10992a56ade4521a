"""Step caching: ComfyUI 0.26's EasyCache decisions in our loop, video and audio, per guidance pass.

`CachedPasses` wraps a step's pass runner. Per step it either runs the transformer, or reuses each pass's last
"output − input" (velocity minus noisy latent, the space ComfyUI's EasyCache caches for LTX-2's audio + video model,
whose diffusion model takes the noisy latent itself and returns the velocity) added to the new input:

* the window: a step whose σ is ≤ the σ of `start_percent` and > the σ of `end_percent` may be skipped; the
  percents become σ as ComfyUI's model sampling for LTX-2 turns them (`percent_to_sigma`: ModelSamplingFlux, shift
  2.37; the swap node passes its MODEL's own). Steps before the window run and keep their diffs; steps past it run
  and touch nothing.
* the decision (one pass decides, as EasyCache's first cond uuid does: ComfyUI batches CFGGuider's conds negative
  first, so the unconditional pass where there is one, else the conditional): the input change is the mean |Δ| of
  the video latent subsampled every `subsample`-th row and column (ComfyUI's `[..., ::8, ::8]` over H, W of
  (B, C, F, H, W): here the tokens (F·H·W, C) seen as (F, H, W, C)); the relative transformation rate k is the
  output change over the input change of the last two computed steps; k · input change / mean |output| accumulates
  while steps are skipped, and a step is skipped while the sum stays under `reuse_threshold` (reset to 0 when a
  step runs). The mean |output| is taken over every pass of the step, as ComfyUI takes it over the conds of its
  forward (all of them where they fit in one, its default; split by memory, its first forward's alone).
* the audio diffs are applied whenever the video decides to skip.

Host reads: deciding by threshold reads ONE value per step (the comparison with the threshold), from the third
step of the window on; the window itself is decided on the host from the schedule, with no read. The
schedule-decided variant (`CacheSettings.skip_steps`: the steps to skip fixed up front, e.g. an earlier run's
`CacheRecord.skipped`) reads nothing: 0 host reads per step.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sys
from collections.abc import Callable

import torch

from ltx2_core.model.transformer import to_x0
from ltx2_core.types import StreamInput

LTX2_SHIFT = 2.37  # ComfyUI's sampling shift for LTX-2 (supported_models.LTXV, ModelSamplingFlux)
KINDS = ("easycache",)
log = logging.getLogger(__name__)


def percent_to_sigma(percent: float, shift: float = LTX2_SHIFT) -> float:
    """σ at `percent` of the sampling, as ComfyUI's ModelSamplingFlux (LTX-2's model sampling) gives it: 1 at or
    below 0, 0 at or above 1, else the time shift of 1 − percent."""
    if percent <= 0.0:
        return 1.0
    if percent >= 1.0:
        return 0.0
    t = 1.0 - percent
    return math.exp(shift) / (math.exp(shift) + (1.0 / t - 1.0))


@dataclasses.dataclass(frozen=True)
class CacheRecord:
    """What a cached stage did: `skipped` step indices (0-based) of `steps`, the transformer forwards and guidance
    passes they saved, and the values read on the host to decide (one per decided step; 0 for `skip_steps`)."""

    steps: int
    skipped: tuple[int, ...]
    forwards_saved: int
    passes_saved: int
    host_reads: int = 0


@dataclasses.dataclass(frozen=True)
class CacheSettings:
    """EasyCache's settings (the defaults are ComfyUI's EasyCache node's). `start_sigma` / `end_sigma`: the window's
    σ bounds given directly (the swap node: its MODEL's `percent_to_sigma`); None: from the percents by LTX-2's
    model sampling. `skip_steps`: the schedule-decided variant, these step indices are skipped (where a diff
    exists) and nothing is read on the host. `verbose`: each decision is logged with its cumulative change rate, as
    EasyCache's verbose option logs it (one more host read per decided step). `report` gets the stage's
    `CacheRecord` when it ends."""

    reuse_threshold: float = 0.2
    start_percent: float = 0.15
    end_percent: float = 0.95
    subsample: int = 8
    start_sigma: float | None = None
    end_sigma: float | None = None
    skip_steps: tuple[int, ...] | None = None
    verbose: bool = False
    report: Callable[[CacheRecord], None] | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.reuse_threshold) and self.reuse_threshold >= 0):
            raise ValueError(f"cache threshold must be a number ≥ 0 (ComfyUI's default 0.2), got "
                             f"{self.reuse_threshold!r}")
        for name in ("start_percent", "end_percent"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"cache {name.replace('_percent', '')} must be a fraction of the sampling in "
                                 f"[0, 1] (ComfyUI's defaults 0.15 and 0.95), got {value!r}")
        if isinstance(self.subsample, bool) or not isinstance(self.subsample, int) or self.subsample < 1:
            raise ValueError(f"cache subsample must be an integer ≥ 1 (ComfyUI's 8), got {self.subsample!r}")
        if self.skip_steps is not None:
            object.__setattr__(self, "skip_steps", tuple(sorted({int(i) for i in self.skip_steps})))

    def window(self) -> tuple[float, float]:
        """(σ at the start, σ at the end) of the window."""
        start = percent_to_sigma(self.start_percent) if self.start_sigma is None else self.start_sigma
        end = percent_to_sigma(self.end_percent) if self.end_sigma is None else self.end_sigma
        return start, end


BEFORE, INSIDE, PAST = "before", "inside", "past"


def step_windows(sigmas: torch.Tensor, start_sigma: float, end_sigma: float) -> tuple[str, ...]:
    """Where each step's σ lies, compared as ComfyUI compares them (its σ tensor against the Python float, in the
    tensor's dtype): PAST where not σ > end, else INSIDE where σ ≤ start, else BEFORE. `sigmas` on the CPU."""
    return tuple(PAST if not bool(s > end_sigma) else INSIDE if bool(s <= start_sigma) else BEFORE
                 for s in sigmas[:-1])


def decider_pass(passes: tuple[str, ...]) -> int:
    """The pass whose forward decides: ComfyUI runs CFGGuider's conds batched negative first, so its first uuid is
    the unconditional one where CFG runs, else the conditional."""
    return passes.index("uncond") if "uncond" in passes else passes.index("cond")


class CachedPasses:
    """A PassRunner that skips steps by EasyCache's rule (module docstring). Built for one stage: it counts the
    steps it is called for. `inner` must give velocities (`BatchedPasses`, `ChunkedPasses`); `grid` is the
    (frames, rows, columns) of the video latent whose first F·H·W tokens are the generated clip (appended
    conditioning tokens follow and are not subsampled)."""

    def __init__(self, inner, settings: CacheSettings, sigmas: torch.Tensor, grid: tuple[int, int, int]) -> None:
        if not hasattr(inner, "velocities"):
            raise ValueError(f"step caching runs every pass on this device; {type(inner).__name__} (CFG-parallel) "
                             "gives none to cache: run without the cache or without CFG parallelism")
        self.inner, self.settings, self.grid = inner, settings, grid
        self.passes = inner.passes
        self.decider = decider_pass(self.passes)
        self.windows = step_windows(sigmas.detach().cpu(), *settings.window())
        self.step, self.skipped, self.reads = 0, [], 0
        self.diffs: tuple[torch.Tensor, torch.Tensor] | None = None
        self.x_prev = self.out_prev = self.norm_prev = self.rate = None
        self.cumulative = 0.0

    def _subsample(self, tokens: torch.Tensor) -> torch.Tensor:
        frames, rows, cols = self.grid
        s = self.settings.subsample
        clip = tokens[self.decider, : frames * rows * cols]
        return clip.unflatten(0, (frames, rows, cols))[:, ::s, ::s].clone()

    def _skip(self, index: int, video: StreamInput, audio: StreamInput):
        self.skipped.append(index)
        return video.latent + self.diffs[0], audio.latent + self.diffs[1]

    def __call__(self, video: StreamInput | None, audio: StreamInput) -> tuple[torch.Tensor, torch.Tensor]:
        if video is None:
            raise ValueError("step caching decides on the video; an audio-only run takes no cache")
        index, self.step = self.step, self.step + 1
        where = self.windows[index] if index < len(self.windows) else PAST
        velocities = None
        input_change = None
        if where == INSIDE and self.settings.skip_steps is not None:
            if index in self.settings.skip_steps and self.diffs is not None:
                velocities = self._skip(index, video, audio)
        elif where == INSIDE:
            if self.x_prev is not None:
                input_change = (self._subsample(video.latent) - self.x_prev).flatten().abs().mean()
            if self.norm_prev is not None and self.rate is not None:
                self.cumulative = self.cumulative + self.rate * input_change / self.norm_prev
                self.reads += 1
                skip = self.diffs is not None and bool(self.cumulative < self.settings.reuse_threshold)  # host read
                if self.settings.verbose:
                    log.info("EasyCache [verbose, LTX-2 sampler] - %s step %d; cumulative_change_rate: %r, "
                             "reuse_threshold: %r", "skipping" if skip else "NOT skipping", index,
                             float(self.cumulative), self.settings.reuse_threshold)
                if skip:
                    velocities = self._skip(index, video, audio)
                else:
                    self.cumulative = 0.0
        if velocities is None:
            velocities = self.inner.velocities(video, audio)
            if where != PAST:
                self._update(where, video, audio, velocities, input_change)
        video_v, audio_v = velocities
        return to_x0(video.latent, video_v, video.timesteps), to_x0(audio.latent, audio_v, audio.timesteps)

    def _update(self, where: str, video: StreamInput, audio: StreamInput, velocities, input_change) -> None:
        video_v, audio_v = velocities
        if where == INSIDE and self.settings.skip_steps is None:
            if self.norm_prev is not None and input_change is not None:
                output_change = (self._subsample(video_v) - self.out_prev).flatten().abs().mean()
                self.rate = output_change / input_change
            self.x_prev, self.out_prev = self._subsample(video.latent), self._subsample(video_v)
            self.norm_prev = video_v.flatten().abs().mean()
        self.diffs = (video_v - video.latent, audio_v - audio.latent)

    def record(self) -> CacheRecord:
        forwards = getattr(self.inner, "forwards", 1)
        skipped = tuple(self.skipped)
        return CacheRecord(len(self.windows), skipped, len(skipped) * forwards, len(skipped) * len(self.passes),
                           self.reads)

    def finish(self, name: str = "denoise") -> CacheRecord:
        """Logs the record in ComfyUI's own words ("EasyCache - skipped N/M steps", then ours in brackets) and hands it
        to `settings.report`."""
        record = self.record()
        done = record.steps - len(record.skipped)
        speedup = record.steps / done if done else 1.0
        log.info("EasyCache - skipped %d/%d steps (%.2fx speedup) [LTX-2 sampler, %s: steps %s, transformer forwards "
                 "saved %d]", len(record.skipped), record.steps, speedup, name, list(record.skipped),
                 record.forwards_saved)
        if self.settings.report is not None:
            self.settings.report(record)
        return record


def print_record(record: CacheRecord) -> None:
    """A `CacheSettings.report` for the command line: the record on stderr."""
    print(f"step cache: skipped {len(record.skipped)}/{record.steps} steps {list(record.skipped)}, transformer "
          f"forwards saved {record.forwards_saved}", file=sys.stderr)


def cached_runner(runner, settings: CacheSettings | None, sigmas: torch.Tensor,
                  grid: tuple[int, int, int] | None):
    """`runner` wrapped in the step cache, or as it is without settings."""
    if settings is None:
        return runner
    if grid is None:
        raise ValueError("step caching decides on the video; an audio-only run (text to audio) takes no cache")
    return CachedPasses(runner, settings, sigmas, grid)


__all__ = ["KINDS", "LTX2_SHIFT", "CacheRecord", "CacheSettings", "CachedPasses", "cached_runner", "decider_pass",
           "percent_to_sigma", "print_record", "step_windows"]
