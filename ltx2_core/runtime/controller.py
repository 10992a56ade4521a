"""The caller's side of a multi-device generation: persistent workers, started once per layout and reused.

    controller = Controller(ModelFiles(...), ParallelConfig(cfg=2, sp=2))
    video, audio, generator_state, keyframes = controller.run(StageJob(...), progress, should_stop)
    value = controller.call(task)    # a `protocol.Task` on every rank (a spread decode): rank 0's result
    controller.shutdown()    # also when the controller is collected, and at interpreter exit

(`WorkerSampler` wraps `run` as a pipeline's `StageSampler`.) Faults become exceptions within `timeout` seconds,
naming the rank and its last error: a worker that exits, or one whose heartbeat stops while a job runs (silence
between jobs is no fault: a job counts from its start); the workers are then shut down and the next job starts
them again. A worker that dies between jobs is replaced before the next one: spawned workers all start again,
and a rank of a torchrun launch is awaited (REPLACE_TIMEOUT s) while torchrun starts the launch again. An interrupt
(`should_stop()` turning true, or the progress callback raising, as ComfyUI's does) stops every rank at the same
stop point (a read of its `should_stop` before a step or a transformer block, so within a block or two);
`run` then raises (the callback's exception, or JobInterrupted) once they have stopped, and the workers are ready
for the next job. Results come back through
torch.multiprocessing queues, whose tensors travel in shared memory, not pickled through a pipe.

Spawned workers would re-run the caller's main script (ComfyUI's main.py) on start; the controller hides it, so a
worker imports only this package.
"""

from __future__ import annotations

import contextlib
import math
import queue
import sys
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch.utils._pytree import tree_map

from ltx2_core.errors import Interrupted, LTX2Error
from ltx2_core.model_files import ModelFiles
from ltx2_core.parallel.config import ParallelConfig
from ltx2_core.runtime.attached import AttachedWorkers
from ltx2_core.runtime.spawned import SpawnedWorkers
from ltx2_core.runtime.protocol import (
    Alive,
    Done,
    Error,
    Finished,
    JobMessage,
    Note,
    Progress,
    Ready,
    StageJob,
    Stopped,
    Task,
    WorkerMessage,
    WorkerSpec,
)

POLL = 0.2  # seconds between liveness checks while waiting
STOP_MARGIN = 1  # stop points past the furthest rank (its next one) at which an interrupt stops every rank
REPLACE_TIMEOUT = 120.0  # seconds a torchrun rank that died between jobs has to attach again (torchrun's restart)


class WorkerError(LTX2Error, RuntimeError):
    """A worker died, hung or failed; the message names the rank and its last error. `errors`: {rank: the last line
    of its traceback} when ranks reported errors and none died (empty otherwise)."""

    def __init__(self, message: str, errors: dict[int, str] | None = None) -> None:
        super().__init__(message)
        self.errors = dict(errors or {})


class JobInterrupted(Interrupted):
    """The job was interrupted; the workers are ready for the next one."""


class Controller:
    """`attach` None: one spawned process per device here (CUDA devices 0..N-1 for device_type "cuda"); "HOST:PORT":
    listen there for workers launched by torchrun (`python -m ltx2_core.runtime --connect HOST:PORT`)."""

    def __init__(self, files: ModelFiles, layout: ParallelConfig, *, device_type: str = "cpu",
                 dtype: torch.dtype | None = None, threads: int | None = None, timeout: float = 30.0,
                 start_timeout: float = 600.0, attach: str | None = None) -> None:
        self.config = files.transformer_config()
        local_gpus = torch.cuda.device_count() if device_type == "cuda" and attach is None else None
        layout.check(heads=(self.config.video.heads, self.config.audio.heads), devices=local_gpus)
        self.files, self.layout, self.device_type, self.dtype, self.threads = files, layout, device_type, dtype, threads
        self.timeout, self.start_timeout = timeout, start_timeout
        self.workers = (SpawnedWorkers(layout.world_size) if attach is None
                        else AttachedWorkers(attach, layout.world_size))
        self.job, self.started = 0, time.monotonic()  # the current job's number and start
        # not atexit.register(self.shutdown): that would keep every controller, and its workers' queues, alive
        weakref.finalize(self, self.workers.close, 2.0)

    @property
    def pids(self) -> list[int]:
        return self.workers.pids

    def start(self, should_stop: Callable[[], bool] | None = None) -> None:
        """Starts the workers (once per layout; attached ones: waits for them to connect) and waits until each
        has loaded its shard; JobInterrupted (with the workers stopped) when `should_stop()` turns true first. A
        worker that died since the last job is replaced first (module docstring)."""
        if self.workers.active and self.workers.dead():
            if self.workers.replaceable:
                return self._await_replacements(should_stop)
            self.shutdown()  # spawned here: they all start again
        if self.workers.active:
            return
        spec = WorkerSpec(self.files, self.layout, self.device_type, self.dtype, None, self.threads)
        self.workers.launch(spec, _main_script_hidden)
        self._count_silence_from_now()
        ready, deadline = set(), time.monotonic() + self.start_timeout
        while len(ready) < self.layout.world_size:
            if time.monotonic() > deadline:
                self._fail(self.workers.late(ready, self.start_timeout))
            if should_stop is not None and should_stop():
                self.shutdown()
                raise JobInterrupted("interrupted while the workers were loading; they start again with the next job")
            message = self._next(math.inf)  # a load may take long: the deadline bounds it, and dead() still counts
            if isinstance(message, Ready):
                ready.add(message.rank)

    def _await_replacements(self, should_stop: Callable[[], bool] | None) -> None:
        """Waits until a rank took the place of each dead one and every rank is ready; WorkerError naming a dead
        rank when none took its place within REPLACE_TIMEOUT s."""
        start = time.monotonic()
        while (dead := self.workers.dead()) or len(self.workers.ready) < self.layout.world_size:
            waited = time.monotonic() - start
            if dead and waited > REPLACE_TIMEOUT:
                self._fail(f"worker rank {dead[0][0]} {dead[0][1]} between jobs, and no worker took its place within "
                           f"{REPLACE_TIMEOUT:g} s (torchrun starts its launch again while --max-restarts allow): "
                           "launch the workers again")
            if waited > self.start_timeout:
                self._fail(self.workers.late(self.workers.ready, self.start_timeout))
            if should_stop is not None and should_stop():
                raise JobInterrupted("interrupted while a worker that died was being replaced; the next job waits "
                                     "for it again")
            self._receive()

    def run(self, job: StageJob, progress: Callable[[int, int], None] | None = None,
            should_stop: Callable[[], bool] | None = None, preview: Callable[[np.ndarray], None] | None = None
            ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
        """One sampling stage on the workers: (video latent, audio latent (None for a video-only stage), generator
        state, generated keyframes (DFR's slots; None without)), on the CPU.
        `preview` gets each preview image (RGB uint8) rank 0 sends, before the step's `progress`."""
        self._send(job, should_stop)
        stopped: BaseException | None = None  # why the job is being stopped
        while True:
            if stopped is None and should_stop is not None and should_stop():
                stopped = JobInterrupted("interrupted; every rank stopped at the same point")
                self.interrupt()
            try:
                message = self._next(self.timeout)
            except WorkerError as error:  # while stopping (a rank the stop reached late): stopped all the same
                if stopped is None:
                    raise
                raise stopped from error
            if not isinstance(message, JobMessage) or message.job != self.job:
                continue
            if isinstance(message, Progress) and preview is not None and message.image is not None:
                preview(message.image)
            if isinstance(message, Progress) and progress is not None and stopped is None:
                try:
                    progress(message.done, message.total)
                except BaseException as exc:  # e.g. ComfyUI's interrupt, raised from its progress hook
                    stopped = exc
                    self.interrupt()
            elif isinstance(message, Done) and stopped is None:
                return (message.video.clone(), _clone(message.audio), message.generator_state,
                        _clone(message.keyframes))
            elif isinstance(message, (Done, Stopped)):
                raise stopped or JobInterrupted("interrupted; every rank stopped at the same point")

    def call(self, task: Task, should_stop: Callable[[], bool] | None = None) -> Any:
        """`task` on every rank (`protocol.Task`); rank 0's return value, its tensors copied out of the queue's
        shared memory. A task has no stop points: `should_stop` is read only while the workers start."""
        self._send(task, should_stop)
        finished: dict[int, Any] = {}
        while len(finished) < self.layout.world_size:
            message = self._next(self.timeout)
            if isinstance(message, Finished) and message.job == self.job:
                finished[message.rank] = message.value
            elif isinstance(message, Stopped) and message.job == self.job:
                raise JobInterrupted("the task was interrupted")
        return tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, finished[0])

    def _send(self, work: StageJob | Task, should_stop: Callable[[], bool] | None) -> None:
        """Starts the workers if they are not and sends `work` to every rank as the next job."""
        self.start(should_stop)
        self.job += 1
        self.workers.begin()
        self._count_silence_from_now()
        self.started = time.monotonic()
        for rank in range(self.layout.world_size):
            self.workers.send(rank, self.job, work)

    def interrupt(self) -> None:
        """Every rank stops at the same stop point (a read of its `should_stop`, before a step or a transformer
        block): STOP_MARGIN past the furthest rank, plus those it passes, at its pace so far, in the `lead` seconds
        a stop may take to reach every rank. Never a device sync: the points are counted on the host."""
        furthest = self.workers.furthest()
        pace = furthest / max(time.monotonic() - self.started, 1e-3)
        self.workers.stop_at(self.job, furthest + STOP_MARGIN + round(pace * self.workers.lead))

    def _count_silence_from_now(self) -> None:
        """Idle workers are not hung: a job's silence counts from its start (or the workers' launch)."""
        self.seen = dict.fromkeys(range(self.layout.world_size), time.monotonic())

    def _next(self, timeout: float) -> WorkerMessage | None:
        """The next message that is not a heartbeat, or None after POLL seconds without one; WorkerError (after
        shutting the workers down) when a worker died, reported an error, or was silent for `timeout` seconds."""
        message = self._receive()
        self._check_alive(timeout)
        return message

    def _receive(self) -> WorkerMessage | None:
        """`_next` without the liveness check (while dead ranks are being replaced)."""
        try:
            message = self.workers.results.get(timeout=POLL)
        except queue.Empty:
            return None
        if isinstance(message, (Alive, Ready, Error, Finished)):
            self.seen[message.rank] = time.monotonic()
        elif not isinstance(message, Note):  # the job's messages come from rank 0
            self.seen[0] = time.monotonic()
        if isinstance(message, Error):
            self._failed(message.rank, message.trace)
        return None if isinstance(message, (Alive, Note)) else message

    def _failed(self, rank: int, trace: str) -> None:
        """A rank reported an error. If another rank died, that is the cause (the error is its peer noticing):
        name the dead one first. Each error the ranks report within a second is said once, with its ranks."""
        errors = {rank: trace.strip().splitlines()[-1]}
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            if dead := self.workers.dead():
                self._fail(f"worker rank {dead[0][0]} {dead[0][1]}; then {_by_error(errors)}")
            try:
                message = self.workers.results.get(timeout=POLL / 4)
            except queue.Empty:
                continue
            if isinstance(message, Error):
                errors.setdefault(message.rank, message.trace.strip().splitlines()[-1])
        self._fail(f"worker {_by_error(errors)}", errors)

    def _check_alive(self, timeout: float) -> None:
        if dead := self.workers.dead():
            self._fail(f"worker rank {dead[0][0]} {dead[0][1]}")
        rank = min(self.seen, key=self.seen.get)  # the longest silent: others may wait on it in a collective
        if time.monotonic() - self.seen[rank] > timeout:
            self._fail(f"worker rank {rank} sent nothing for {timeout:g} s: it hangs")

    def _fail(self, message: str, errors: dict[int, str] | None = None) -> None:
        self.shutdown(timeout=2.0)  # broken workers may never take the request to stop: killed soon after
        raise WorkerError(message + "; the workers were stopped and start again with the next job", errors)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stops every worker (asked first, then killed when spawned here; attached ones wait for the next
        controller) and waits until no spawned process remains."""
        if self.workers.active:
            self.workers.close(timeout)


def _clone(tensor: torch.Tensor | None) -> torch.Tensor | None:
    """A received tensor copied out of the queue's shared memory (None stays None)."""
    return None if tensor is None else tensor.clone()


def _by_error(errors: dict[int, str]) -> str:
    """{rank: last error line} as "ranks 0 and 1 failed: X; rank 2 failed: Y" (each error once)."""
    ranks: dict[str, list[int]] = {}
    for rank, error in sorted(errors.items()):
        ranks.setdefault(error, []).append(rank)
    return "; ".join((f"rank {r[0]}" if len(r) == 1 else f"ranks {', '.join(map(str, r[:-1]))} and {r[-1]}") +
                     f" failed: {error}" for error, r in ranks.items())


@contextlib.contextmanager
def _main_script_hidden() -> Iterator[None]:
    """While processes are spawned: the caller's __main__ looks like an interactive session's, so spawn does not
    re-run its script (e.g. ComfyUI's main.py) in each worker. The workers' target lives in this package."""
    main = sys.modules["__main__"]
    saved = {name: getattr(main, name) for name in ("__file__", "__spec__") if hasattr(main, name)}
    if "__file__" in saved:
        del main.__file__
    main.__spec__ = None  # spawn reads it unguarded
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(main, name, value)
        if "__spec__" not in saved:
            del main.__spec__
