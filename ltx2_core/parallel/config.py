"""The layout of one generation over several devices: `cfg` × `sp` × `tp`, validated before any rank starts.

* `cfg`: guidance passes on different devices (each device batches its share); one gather of predictions per step.
* `sp`: Ulysses sequence parallelism over the video tokens (all-to-all around video self-attention).
* `tp`: Megatron tensor parallelism (column-parallel Q/K/V and FFN-in, row-parallel outputs); the only mode that
  divides the weights, so it is chosen only when they would not fit one device.
"""

from __future__ import annotations

from dataclasses import dataclass

from ltx2_core.errors import LTX2Error
from ltx2_core.releases import RELEASED_HEADS

AXES = ("cfg", "sp", "tp")
HEADROOM = 0.8  # of a device's free memory the weights may take (the rest: activations, decoding)


class ParallelConfigError(LTX2Error, ValueError):
    """A parallel layout that cannot run; the message names the fix."""


@dataclass(frozen=True)
class ParallelConfig:
    cfg: int = 1
    sp: int = 1
    tp: int = 1

    def __post_init__(self) -> None:
        bad = [f"{axis}={getattr(self, axis)!r}" for axis in AXES
               if isinstance(getattr(self, axis), bool) or not isinstance(getattr(self, axis), int)
               or getattr(self, axis) < 1]
        if bad:
            raise ParallelConfigError(f"parallel degrees must be integers ≥ 1, got {', '.join(bad)}")

    @property
    def world_size(self) -> int:
        return self.cfg * self.sp * self.tp

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.cfg, self.sp, self.tp

    def check(self, *, world_size: int | None = None, devices: int | None = None,
              heads: tuple[int, ...] = (), passes: int | None = None) -> ParallelConfig:
        """Every problem of this layout for the given facts, in one ParallelConfigError; returns self when fine.
        `heads`: the video and audio head counts; `passes`: the active guidance passes of the run."""
        problems = []
        name = f"cfg {self.cfg} × sp {self.sp} × tp {self.tp} needs"
        if world_size is not None and world_size != self.world_size:
            problems.append(f"{name} {_plural(self.world_size, 'rank')}, but {world_size} "
                            f"{'was' if world_size == 1 else 'were'} started; start {self.world_size} "
                            f"(torchrun --nproc-per-node) or change the degrees so their product is {world_size}")
        if devices is not None and self.world_size > devices:
            problems.append(f"{name} {_plural(self.world_size, 'device')}, but only {devices} "
                            f"{'is' if devices == 1 else 'are'} visible; lower a degree")
        for count in dict.fromkeys(heads):  # video and audio often have the same count: say it once
            if count % (self.tp * self.sp):
                problems.append(f"tp·sp = {self.tp * self.sp} must divide the {count} attention heads; pick tp and "
                                f"sp whose product divides {count}")
        if passes is not None and self.cfg > passes:
            problems.append(f"cfg {self.cfg} exceeds the {passes} guidance passes of this run (a distilled or "
                            f"unguided run has 1); use cfg ≤ {passes} and put the devices into sp instead")
        if problems:
            raise ParallelConfigError("invalid parallel layout:" + "".join(f"\n  - {p}" for p in problems))
        return self


def stage_layout(layout: ParallelConfig, passes: int, heads: tuple[int, ...]) -> ParallelConfig:
    """The layout a stage of `passes` guidance passes runs in under `layout` (`launch.finish`, `stage_regroup`):
    cfg × sp merged into one sp where the stage has fewer passes than cfg ranks and the merged degree divides the
    `heads`; `layout` itself otherwise."""
    merged = ParallelConfig(1, layout.cfg * layout.sp, layout.tp)
    if layout.cfg == 1 or passes >= layout.cfg or any(count % (merged.sp * merged.tp) for count in heads):
        return layout
    return merged


def default_layout(devices: int, passes: int, weight_bytes: int, free_bytes: int,
                   heads: tuple[int, ...] = RELEASED_HEADS) -> ParallelConfig:
    """A layout for `devices` GPUs of `free_bytes` each: tensor parallel only as far as the weights need to fit
    (HEADROOM of a device), then CFG-parallel over as many passes as the devices allow, the rest Ulysses."""
    tp = 1
    while weight_bytes / tp > HEADROOM * free_bytes and devices % (tp * 2) == 0 and _divides(tp * 2, heads):
        tp *= 2
    remaining = devices // tp
    cfg = max(d for d in range(1, min(passes, remaining) + 1) if remaining % d == 0)
    sp = remaining // cfg
    while sp > 1 and not _divides(tp * sp, heads):
        sp -= 1
    return ParallelConfig(cfg, sp, tp)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


def _divides(degree: int, heads: tuple[int, ...]) -> bool:
    return all(count % degree == 0 for count in heads)
