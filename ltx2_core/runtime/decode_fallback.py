"""When the video decode on the workers runs out of memory (`decode_task.WorkerDecode`): the caller decodes the
video itself, with its own decoder, exactly as a decode here (`tiling.decode_video`), instead of losing the run.

A rank that runs out of memory inside the decode leaves its peers waiting in a collective, which no backend can
abandon safely: the controller stops every worker (`WorkerError`, with each rank's last error line) and the next job
starts them again (each reloads its shard). Their devices' memory is freed before the decode here starts, which
helps when this process shares a device with a worker. Any other worker failure is raised as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import torch

from ltx2_core.memory.plan import MemoryPlanError
from ltx2_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder
from ltx2_core.model.video_vae.tiling import TilingConfig, decode_video
from ltx2_core.runtime.controller import WorkerError

# the last line of a traceback that ran out of memory: torch's (CUDA, MPS, XPU) and the CPU allocator's
MEMORY_ERRORS = re.compile(r"OutOfMemoryError|out of memory|not enough memory|can't allocate memory", re.IGNORECASE)
ASKED = re.compile(r"tried to allocate ([\d.]+ \w+)", re.IGNORECASE)
FREE = re.compile(r"of which ([\d.]+ \w+) is free", re.IGNORECASE)


def out_of_memory(error: WorkerError) -> str | None:
    """Which ranks ran out of memory and by how much (as far as their error says), e.g. "rank 1: 1.50 GiB asked,
    612.00 MiB free"; None when no rank's error was for memory (a crash, a hang, another error)."""
    found = [f"rank {rank}{_amounts(line)}" for rank, line in sorted(error.errors.items())
             if MEMORY_ERRORS.search(line)]
    return "; ".join(found) or None


def _amounts(line: str) -> str:
    asked, free = ASKED.search(line), FREE.search(line)
    parts = ([f"{asked.group(1)} asked"] if asked else []) + ([f"{free.group(1)} free"] if free else [])
    return f": {', '.join(parts)}" if parts else ""


def fallback_line(ranks: str, device: torch.device) -> str:
    """The one line that tells the user why the video is decoded here."""
    return (f"LTX-2: the video decode on the workers ran out of memory ({ranks}); decoding it in this process on "
            f"{device} instead (the workers were stopped and start again with the next job)")


def decode_here(latent: torch.Tensor, decoder: torch.nn.Module, tiling: TilingConfig | None, *,
                generator: torch.Generator | None, generator_state: torch.Tensor | None,
                timestep: torch.Tensor | None, output_device: torch.device | str | None, why: str) -> torch.Tensor:
    """`decode_video` here, from the generator's state the workers were given (LTX-2.5's diffusion decoder draws
    its noise from it), so the video and the generator after it are a decode here's. MemoryPlanError naming the
    fix when this device runs out of memory too."""
    if generator is not None and generator_state is not None:
        generator.set_state(generator_state)
    try:
        with torch.no_grad():
            return decode_video(latent.to(next(decoder.parameters()).device), decoder, tiling, generator=generator,
                                timestep=timestep, output_device=output_device)
    except torch.OutOfMemoryError as error:
        raise MemoryPlanError(_no_room_here(why, latent.device, decoder, error)) from error
    except RuntimeError as error:
        if not MEMORY_ERRORS.search(str(error)):
            raise
        raise MemoryPlanError(_no_room_here(why, latent.device, decoder, error)) from error


def _no_room_here(why: str, device: torch.device, decoder: torch.nn.Module, error: BaseException) -> str:
    smaller = ("smaller tiles (the decode's spatial tile)" if isinstance(decoder, DiffusionVideoDecoder)
               else "smaller tiles (the decode's spatial or temporal tile)")
    return (f"the video decode ran out of memory on the workers ({why}) and in this process on {device} too "
            f"({str(error).strip().splitlines()[0][:200]}): decode with {smaller}, or generate fewer frames or a "
            "smaller size")


def decoding_on_workers_failed(error: WorkerError, report: Callable[[str], None] | None,
                               device: torch.device) -> str:
    """The ranks that ran out of memory, once the line saying so was given to `report` (None: printed); re-raises
    `error` when the workers failed for another reason."""
    ranks = out_of_memory(error)
    if ranks is None:
        raise error
    (report or print)(fallback_line(ranks, device))
    return ranks
