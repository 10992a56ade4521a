"""The check every node and the command line make before allocating anything: the whole request's count
(`memory.footprint`) against what is free now on the device and on the host (`sizes.device_room`, `sizes.host_room`:
the RAM available, under the process's limits and its cgroup's), stage by stage; a refusal names the stage, its
largest parts, what is free and why, and the nearest clip that fits."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from ltx2_core.geometry import is_frame_count
from ltx2_core.memory.footprint import Job, ModelSizes, Part, request_memory
from ltx2_core.memory.estimates import size
from ltx2_core.memory.sizes import device_room, host_room

# of the free memory a request may count on: the allocator's slack (blocks it keeps, a measured run's resident set
# 0-5 % above the count) and what the process's other threads allocate meanwhile
USABLE = 0.9
STAGE_WORDS = {"latent": "making the latent", "encoding": "encoding the images", "sampling": "sampling",
               "upsampling": "upsampling", "decoding": "decoding", "frames": "making the frames",
               "writing": "writing the mp4"}


class Room(NamedTuple):
    """What may still be allocated: on the device (None: the device is the host, or not known) and on the host
    (None: not known), and what sets the host's figure (`sizes.host_room`)."""

    device: int | None
    host: int | None
    host_reason: str = "RAM available"

    @classmethod
    def now(cls, device: torch.device | None) -> Room:
        """The room on `device` (a GPU; None or the CPU: the host alone) and on the host now."""
        host, reason = host_room()
        return cls(device_room(device) if device is not None and device.type == "cuda" else None, host, reason)

    @property
    def shared(self) -> bool:
        return self.device is None


class Overflow(NamedTuple):
    stage: str
    on_device: bool
    need: int
    free: int


def overflow(job: Job, model: ModelSizes, room: Room) -> Overflow | None:
    """The first stage of `job` whose peak exceeds the usable room on the device or the host (None: every stage
    fits)."""
    for stage, device, host in request_memory(job, model).peaks(room.shared):
        if room.device is not None and device > USABLE * room.device:
            return Overflow(stage, True, device, room.device)
        if room.host is not None and host > USABLE * room.host:
            return Overflow(stage, False, host, room.host)
    return None


def request_problem(job: Job, model: ModelSizes = ModelSizes(), device: torch.device | None = None,
                    room: Room | None = None) -> str | None:
    """Why `job` cannot run now on `device` (where the model computes; None or the CPU: the host, whose RAM then
    holds both sides): the first stage that would not fit the usable part of the free memory (USABLE), its largest
    parts, what is free and why, and the nearest clip that fits (fewer frames at this size, or a smaller size with
    these frames). None when it fits or the free memory is unknown. `room`: what is free (default: measured now, `Room.now`)."""
    room = room or Room.now(device)
    found = overflow(job, model, room)
    if found is None:
        return None
    parts = [p for stage, ps in request_memory(job, model).stages if stage == found.stage for p in ps
             if p.on_device == found.on_device or room.shared]
    held = found.need - sum(p.bytes for p in parts)  # what the stages before it keep (their outputs)
    parts += [Part("what earlier stages keep", held, found.on_device)] if held > 0 else []
    listed = ", ".join(f"{p.name} {size(p.bytes)}" for p in sorted(parts, key=lambda p: -p.bytes)[:4])
    where, free = ("on the device", f"free on {device}") if found.on_device else ("of RAM", room.host_reason)
    fitting = nearest(job, lambda smaller: overflow(smaller, model, room) is None)
    return (f"{describe(job)} needs {size(found.need)} {where} while {STAGE_WORDS[found.stage]} ({listed}), and "
            f"{size(found.free)} is free ({free}), {size(USABLE * found.free)} of it usable; {fitting}")


def describe(job: Job) -> str:
    if not job.video:
        return f"{job.seconds:.1f} s of sound"
    return f"{job.width}x{job.height}, {job.frames} frames"


def nearest(job: Job, fits: Callable[[Job], bool]) -> str:
    """The nearest jobs that fit: the most frames (8k+1; a long clip's duration) at this size, and the largest size
    (keeping the aspect, multiples of 32, of 64 for two-stage) at this length; where neither alone fits, the
    largest size at half, a quarter, ... of the frames."""
    options = []
    shorter = lambda f: job._replace(frames=f, window=min(job.window or f, f))
    frames = _largest([f for f in range(1, job.frames, 8) if is_frame_count(f)], lambda f: fits(shorter(f)))
    if frames is not None:
        seconds = f"{frames / job.fps:.1f} s"
        options.append(seconds if not job.video else f"{seconds} at this size" if job.window else
                       f"{frames} frame{'s' if frames > 1 else ''} ({seconds}) at this size")
    if job.video:
        smaller = _largest_size(job, fits)
        options += [f"{smaller.width}x{smaller.height} at this length"] if smaller is not None else []
    count = job.frames
    while job.video and not options and count > 1:
        count = (count - 1) // 16 * 8 + 1  # about half, 8k+1
        if (smaller := _largest_size(shorter(count), fits)) is not None:
            options.append(f"{smaller.width}x{smaller.height} with {count} frames ({count / job.fps:.1f} s)")
    if not options:
        return "nothing smaller fits either: free memory (close other programs, unload other models) first"
    lower = "duration, window, width or height" if job.window else "frames, width or height" if job.video else \
        "duration"
    return f"{' or '.join(options)} would fit; lower the {lower}"


def _largest_size(job: Job, fits: Callable[[Job], bool]) -> Job | None:
    """The job at the largest smaller size that fits (the aspect kept, in multiples of 32, of 64 for two-stage)."""
    step = 64 if job.two_stage else 32
    resized = lambda w: job._replace(width=w, height=max(step, job.height * w // job.width // step * step))
    width = _largest(list(range(step, job.width, step)), lambda w: fits(resized(w)))
    return None if width is None else resized(width)


def _largest(candidates: list[int], fits: Callable[[int], bool]) -> int | None:
    """The largest of ascending `candidates` that fits (bisection: a smaller one needs no more memory)."""
    low, high = 0, len(candidates)
    while low < high:
        middle = (low + high) // 2
        if fits(candidates[middle]):
            low = middle + 1
        else:
            high = middle
    return candidates[low - 1] if low else None
