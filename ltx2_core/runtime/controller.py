"""The caller's side of a multi-device generation: persistent workers, started once per layout and reused.

    controller = Controller(ModelFiles(...), ParallelConfig(cfg=2, sp=2))
    latent, generator_state = controller.sample(request, positive, negative, progress)
    controller.interrupt()   # from another thread: every rank stops after the same step
    controller.shutdown()    # also at interpreter exit

Faults become exceptions within `timeout` seconds, naming the rank and its last error: a worker that exits, or one
whose heartbeat stops; the workers are then shut down and the next job starts them again. Results come back through
torch.multiprocessing queues, whose tensors travel in shared memory, not pickled through a pipe.
"""

from __future__ import annotations

import atexit
import os
import queue
import tempfile
import time
from collections.abc import Callable

import torch
import torch.multiprocessing as mp

from ltx2_core.errors import LTX2Error
from ltx2_core.model_files import ModelFiles
from ltx2_core.parallel.config import ParallelConfig
from ltx2_core.pipeline import Request
from ltx2_core.runtime.worker import WorkerSpec, worker_main
from ltx2_core.stages import AVLatent
from ltx2_core.types import TextEmbeddings

POLL = 0.2  # seconds between liveness checks while waiting
STOP_MARGIN = 2  # steps past the furthest rank at which an interrupt stops every rank


class WorkerError(LTX2Error, RuntimeError):
    """A worker died, hung or failed; the message names the rank and its last error."""


class JobInterrupted(LTX2Error, InterruptedError):
    """The job was interrupted; the workers are ready for the next one."""


class Controller:
    def __init__(self, files: ModelFiles, layout: ParallelConfig, *, device_type: str = "cpu",
                 dtype: torch.dtype | None = None, threads: int | None = None, timeout: float = 30.0,
                 start_timeout: float = 600.0) -> None:
        layout.check(heads=(files.transformer_config().video.heads, files.transformer_config().audio.heads),
                     devices=torch.cuda.device_count() if device_type == "cuda" else None)
        self.files, self.layout, self.device_type, self.dtype, self.threads = files, layout, device_type, dtype, threads
        self.timeout, self.start_timeout = timeout, start_timeout
        self.processes: list = []
        self.job = 0
        atexit.register(self.shutdown)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def start(self) -> None:
        """Starts the workers (once per layout) and waits until each has loaded its shard."""
        if self.processes:
            return
        context = mp.get_context("spawn")
        self.folder = tempfile.mkdtemp(prefix="ltx2-workers-")
        spec = WorkerSpec(self.files, self.layout, self.device_type, self.dtype, os.path.join(self.folder, "init"),
                          self.threads)
        self.results = context.Queue()
        self.jobs = [context.Queue() for _ in range(self.layout.world_size)]
        self.control = context.Array("q", [-1, 0], lock=False)  # (job, stop after this many steps)
        self.positions = context.Array("q", [0] * self.layout.world_size, lock=False)
        self.processes = [context.Process(target=worker_main, daemon=True, name=f"ltx2-worker-{rank}",
                                          args=(rank, spec, self.jobs[rank], self.results, self.control,
                                                self.positions))
                          for rank in range(self.layout.world_size)]
        for process in self.processes:
            process.start()
        self.seen = {rank: time.monotonic() for rank in range(len(self.processes))}
        ready = set()
        while len(ready) < len(self.processes):
            message = self._next(self.start_timeout)
            if message[0] == "ready":
                ready.add(message[1])

    def sample(self, request: Request, positive: TextEmbeddings, negative: TextEmbeddings | None,
               progress: Callable[[str, int, int], None] | None = None) -> tuple[AVLatent, torch.Tensor]:
        """Every sampling stage of `request` on the workers: (the final latent on the CPU, the generator state)."""
        self.start()
        self.job += 1
        self.control[0], self.control[1] = -1, 0
        for rank, jobs in enumerate(self.jobs):
            self.positions[rank] = 0
            jobs.put((self.job, request, positive, negative))
        while True:
            message = self._next(self.timeout)
            kind, job = message[0], message[1]
            if job != self.job:
                continue
            if kind == "progress" and progress is not None:
                progress(*message[2:])
            elif kind == "done":
                return AVLatent(message[2].clone(), message[3].clone(), message[4]), message[5]
            elif kind == "interrupted":
                raise JobInterrupted("interrupted; every rank stopped after the same step")

    def interrupt(self) -> None:
        """Every rank stops after the same step: STOP_MARGIN steps past the furthest one."""
        self.control[1] = max(self.positions[:]) + STOP_MARGIN
        self.control[0] = self.job

    def _next(self, timeout: float) -> tuple:
        """The next message that is not a heartbeat; WorkerError (after shutting the workers down) when a worker
        died, reported an error, or was silent for `timeout` seconds."""
        while True:
            try:
                message = self.results.get(timeout=POLL)
            except queue.Empty:
                self._check_alive(timeout)
                continue
            self.seen[message[1] if message[0] in ("alive", "ready", "error") else 0] = time.monotonic()
            if message[0] == "error":
                self._failed(message[1], message[3])
            if message[0] != "alive":
                return message

    def _failed(self, rank: int, trace: str) -> None:
        """A rank reported an error. If another rank died, that is the cause (the error is its peer noticing):
        name the dead one first; either way with the reporting rank's last error line."""
        last = trace.strip().splitlines()[-1]
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            dead = [(r, p) for r, p in enumerate(self.processes) if not p.is_alive()]
            if dead:
                r, process = dead[0]
                self._fail(f"worker rank {r} (pid {process.pid}) exited with code {process.exitcode}; rank {rank} "
                           f"then failed: {last}")
            time.sleep(POLL / 4)
        self._fail(f"worker rank {rank} failed: {last}")

    def _check_alive(self, timeout: float) -> None:
        for rank, process in enumerate(self.processes):
            if not process.is_alive():
                self._fail(f"worker rank {rank} (pid {process.pid}) exited with code {process.exitcode}")
            if time.monotonic() - self.seen[rank] > timeout:
                self._fail(f"worker rank {rank} (pid {process.pid}) sent nothing for {timeout:g} s: it hangs")

    def _fail(self, message: str) -> None:
        self.shutdown()
        raise WorkerError(message + "; the workers were stopped and start again with the next job")

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stops every worker (asked first, then killed) and waits until no process remains."""
        if not self.processes:
            return
        for jobs, process in zip(self.jobs, self.processes):
            if process.is_alive():
                jobs.put(None)
        deadline = time.monotonic() + timeout
        for process in self.processes:
            process.join(max(deadline - time.monotonic(), 0.1))
            if process.is_alive():
                process.kill()
                process.join(5)
        self.processes = []
