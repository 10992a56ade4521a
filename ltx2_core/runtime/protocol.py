"""What a controller and its workers say to each other, whichever line carries it (queues to spawned workers,
`ltx2_core.runtime.spawned`; sockets to torchrun-launched ones, `ltx2_core.runtime.links`): the worker's start
spec, a sampling job, the messages each way (one picklable NamedTuple per kind, read by type, never by index), and
the `Channel` a worker talks through.

    controller -> worker   Run (a job: a sampling stage or a task), Stop (the stop point where a job stops); None:
                           stop serving
    worker -> controller   Ready, Alive, Progress, Done, Finished, Stopped, Error; Position (attached workers' stop
                           points)
    handshake (links)      Hello (worker), then Spec or Refused (controller)
    controller's own       Note (a refused stranger on the port; the controller reads past it)

Jobs carry CPU tensors only: spawned workers get them through shared memory, attached ones pickled by value.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import numpy as np
import torch

from ltx2_core.model_files import ModelFiles
from ltx2_core.parallel.config import ParallelConfig
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import AVLatent
from ltx2_core.types import TextEmbeddings


class WorkerSpec(NamedTuple):
    """Everything a worker needs to start (picklable)."""

    files: ModelFiles
    layout: ParallelConfig
    device_type: str
    dtype: torch.dtype | None
    init_file: str | None  # the group's rendezvous file (spawned workers); None: torchrun's environment
    threads: int | None = None


class StageJob(NamedTuple):
    """One sampling stage (what `StageSampler` takes) on the CPU. `stage.loras` are (file path, strength): each
    rank reads a file once and cuts its own shards, where a loaded `Lora` would be the whole update, sent through
    every queue or socket with every stage."""

    latent: AVLatent
    positive: TextEmbeddings
    negative: TextEmbeddings | None
    generator_state: torch.Tensor
    stage: Stage[str]
    compile: bool = False
    preview: tuple[torch.Tensor, torch.Tensor] | None = None  # rgb_projection: rank 0 sends a preview per step
    attention: str = "auto"  # the attention backend (`attention_select.MODES`), checked where the job was made


class TaskContext(NamedTuple):
    """What a task runs with on one rank: the rank, its device, the workers' spec (the model files, the dtype) and
    `kept`, this process's store across jobs (e.g. a decoder a task loaded once; keyed by the task's own names)."""

    rank: int
    device: torch.device
    spec: WorkerSpec
    kept: dict


class Task(Protocol):
    """A job other than a sampling stage (a spread decode, a prompt encoding): picklable, run on every rank (each
    rank joins the task's collectives over the workers' group); rank 0's return value comes back (`Finished`)
    once every rank has finished, the others' are dropped. Its tensors are CPU tensors, both ways."""

    def run(self, context: TaskContext) -> Any: ...


class Run(NamedTuple):
    """The controller asks every rank to sample `work` (or run the task `work`) as job number `job`."""

    job: int
    work: StageJob | Task


class Stop(NamedTuple):
    """Every rank stops job `job` at its stop point number `point` (a read of its `should_stop`, before a step or a
    transformer block; attached workers: spawned ones read a shared array)."""

    job: int
    point: int


class Ready(NamedTuple):
    """Rank `rank` (process `pid`) has loaded its shard."""

    rank: int
    pid: int


class Alive(NamedTuple):
    """The heartbeat of rank `rank`, every `worker.HEARTBEAT` seconds."""

    rank: int


class Progress(NamedTuple):
    """Rank 0 finished step `done` of `total` of job `job`; `image` (H, W, 3) uint8, the newest preview, or None."""

    job: int
    done: int
    total: int
    image: np.ndarray | None


class Done(NamedTuple):
    """Rank 0's result of job `job`: the latent (CPU; `audio` None for a video-only stage), the generator's state
    after it, and the denoised content of the stage's generated keyframe slots (DFR; None without slots)."""

    job: int
    video: torch.Tensor
    audio: torch.Tensor | None
    generator_state: torch.Tensor
    keyframes: torch.Tensor | None = None


class Finished(NamedTuple):
    """Rank `rank` finished task `job`: rank 0 with `Task.run`'s return value, the others with None (the
    controller returns once every rank has, so a rank's late failure is the task's, not the next job's)."""

    job: int
    value: Any
    rank: int = 0


class Stopped(NamedTuple):
    """Job `job` stopped at the stop point on rank 0 (every rank stops at the same point)."""

    job: int


class Error(NamedTuple):
    """Rank `rank` failed, in job `job` (None: while loading or joining); `trace` is its traceback."""

    rank: int
    job: int | None
    trace: str


class Position(NamedTuple):
    """Rank `rank` has reached stop point number `points` of the current job (what an interrupt's stop point is
    counted from)."""

    rank: int
    points: int


class Note(NamedTuple):
    """What the controller's own side noticed (a refused connection); the controller reads past it."""

    text: str


class Hello(NamedTuple):
    """An attaching worker introduces itself (after authentication)."""

    rank: int
    world: int
    pid: int
    host: str


class Spec(NamedTuple):
    """The controller accepts an attaching worker: load this."""

    spec: WorkerSpec


class Refused(NamedTuple):
    """The controller refuses an attaching worker, and says why."""

    why: str


WorkerMessage = Ready | Alive | Progress | Done | Finished | Stopped | Error | Note  # what a controller reads
JobMessage = Progress | Done | Finished | Stopped  # the ones that belong to a job (rank 0's)


class Channel(Protocol):
    """A worker's line to its controller (`spawned.LocalChannel` for spawned workers, `links.SocketChannel` for
    attached ones)."""

    def get(self) -> Run | None: ...  # the next job, None: stop

    def put(self, message: WorkerMessage) -> None: ...

    def stop_point(self, job: int) -> int | None: ...  # the stop point where `job` stops, None: it runs on

    def reached(self, rank: int, points: int) -> None: ...  # this rank has reached stop point `points` of the job

    def connected(self) -> bool: ...  # False once the caller is gone and this worker cannot serve another

    def abandoned(self) -> None: ...  # the caller is gone: releases what it would have, before the worker exits
