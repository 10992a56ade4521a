"""A persistent worker: one process per device, holding its shard of the transformer across jobs.

Started by the `Controller` (torch.multiprocessing, spawn). It joins the group (NCCL on GPUs, gloo on the CPU),
loads its shard once, reports `ready`, then runs sampling jobs (the encoded prompts in, the final latent and the
generator state out from rank 0, through shared memory) until it gets `None`. A heartbeat thread reports every
HEARTBEAT seconds, so a hung rank is told from a busy one.

Interrupts: the controller writes (job id, step) into shared memory; every rank reads it on the host after queuing
each step (no device sync) and stops after the SAME step, so no rank is left inside a collective.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from typing import NamedTuple

import torch
import torch.distributed as dist

from ltx2_core.model_files import ModelFiles
from ltx2_core.parallel.config import ParallelConfig
from ltx2_core.parallel.launch import finish, join, tensor_parallel_for

HEARTBEAT = 2.0  # seconds between a worker's "alive" messages


class WorkerSpec(NamedTuple):
    """Everything a worker needs to start (picklable)."""

    files: ModelFiles
    layout: ParallelConfig
    device_type: str
    dtype: torch.dtype | None
    init_file: str
    threads: int | None = None


class Interrupted(Exception):
    """The controller asked every rank to stop after a given step."""


class _Steps:
    """The progress callback of a job on one rank: its global step count, written for the controller, checked
    against the stop step; rank 0 also reports progress."""

    def __init__(self, rank: int, job: int, control, positions, results) -> None:
        self.rank, self.job, self.control, self.positions, self.results = rank, job, control, positions, results
        self.count = 0

    def __call__(self, stage: str, done: int, total: int) -> None:
        self.count += 1
        self.positions[self.rank] = self.count
        stop_job, stop_step = self.control[0], self.control[1]
        if stop_job == self.job and self.count >= stop_step:
            raise Interrupted
        if self.rank == 0:
            self.results.put(("progress", self.job, stage, done, total))


def _heartbeat(rank: int, results) -> None:
    while True:
        results.put(("alive", rank))
        time.sleep(HEARTBEAT)


def worker_main(rank: int, spec: WorkerSpec, jobs, results, control, positions) -> None:
    """The process body: start, then serve jobs until `None`."""
    from ltx2_core.pipeline import sample_request

    if spec.threads:
        torch.set_num_threads(spec.threads)
    torch.set_grad_enabled(False)
    try:
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(spec.layout.world_size), LOCAL_RANK=str(rank))
        device = torch.device("cuda", rank) if spec.device_type == "cuda" else torch.device("cpu")
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method=f"file://{spec.init_file}",
                                rank=rank, world_size=spec.layout.world_size)
        mesh = join(spec.layout, device)
        models = spec.files.load(device, spec.dtype, parallelize=tensor_parallel_for(mesh, spec.layout))
        runner = finish(models.transformer, mesh, spec.layout).runner
    except BaseException:
        results.put(("error", rank, None, traceback.format_exc()))
        return
    threading.Thread(target=_heartbeat, args=(rank, results), daemon=True).start()
    results.put(("ready", rank, os.getpid()))
    while (job := jobs.get()) is not None:
        job_id, request, positive, negative = job
        try:
            latent, generator = sample_request(request, models, positive, negative,
                                               _Steps(rank, job_id, control, positions, results), runner=runner)
            if rank == 0:
                results.put(("done", job_id, latent.video.cpu(), latent.audio.cpu(), latent.fps,
                             generator.get_state()))
        except Interrupted:
            if rank == 0:
                results.put(("interrupted", job_id))
        except BaseException:
            results.put(("error", rank, job_id, traceback.format_exc()))
    dist.destroy_process_group()
