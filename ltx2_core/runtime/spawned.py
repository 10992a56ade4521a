"""How a controller and its spawned workers (one process per device on this machine) talk: torch.multiprocessing
queues (result tensors travel in shared memory, not pickled through a pipe) and two shared arrays, the stop step and
each rank's step count, read and written on the host. Closing releases all of it (queues, their semaphores and
threads, the rendezvous folder)."""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import threading
import time

import torch.multiprocessing as mp

from ltx2_core.parallel.launch import leave
from ltx2_core.runtime.protocol import Run, StageJob, WorkerMessage, WorkerSpec
from ltx2_core.runtime.worker import serve


class LocalChannel:
    """A spawned worker's side: its job queue, the shared result queue and the shared arrays."""

    def __init__(self, jobs, results, control, positions) -> None:
        self.jobs, self.results, self.control, self.positions = jobs, results, control, positions
        self.parent = os.getppid()

    def get(self) -> Run | None:
        return self.jobs.get()

    def put(self, message: WorkerMessage) -> None:
        self.results.put(message)

    def stop_step(self, job: int) -> int | None:
        return self.control[1] if self.control[0] == job else None

    def reached(self, rank: int, steps: int) -> None:
        self.positions[rank] = steps

    def connected(self) -> bool:
        return os.getppid() == self.parent


def worker_main(rank: int, spec: WorkerSpec, jobs, results, control, positions) -> None:
    """A spawned worker's body (its group joins through `spec.init_file`)."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(spec.layout.world_size), LOCAL_RANK=str(rank))
    serve(rank, rank, spec, LocalChannel(jobs, results, control, positions))
    leave()


class SpawnedWorkers:
    """The controller's side of one process per device on this machine."""

    def __init__(self, world_size: int) -> None:
        self.world_size, self.processes = world_size, []

    @property
    def active(self) -> bool:
        return bool(self.processes)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def launch(self, spec: WorkerSpec, hide_main) -> None:
        context = mp.get_context("spawn")
        self.folder = tempfile.mkdtemp(prefix="ltx2-workers-")  # the group's rendezvous file
        spec = spec._replace(init_file=os.path.join(self.folder, "init"))
        # a result queue per rank: a rank stopped while writing would block the others' messages on a shared one
        self.outboxes = [context.Queue() for _ in range(self.world_size)]
        self.results: queue.Queue = queue.Queue()
        self.jobs = [context.Queue() for _ in range(self.world_size)]
        self.control = context.Array("q", [-1, 0], lock=False)  # (job, stop after this many steps)
        self.positions = context.Array("q", [0] * self.world_size, lock=False)
        self.processes = [context.Process(target=worker_main, daemon=True, name=f"ltx2-worker-{rank}",
                                          args=(rank, spec, self.jobs[rank], self.outboxes[rank], self.control,
                                                self.positions))
                          for rank in range(self.world_size)]
        with hide_main():
            for process in self.processes:
                process.start()
        self.forwarders = [threading.Thread(target=self._forward, args=(outbox, process), daemon=True)
                           for outbox, process in zip(self.outboxes, self.processes)]
        for thread in self.forwarders:
            thread.start()

    def _forward(self, outbox, process) -> None:
        """Moves one rank's messages into `results` while its process runs."""
        while process in self.processes:
            try:
                self.results.put(outbox.get(timeout=0.5))
            except queue.Empty:
                continue
            except (EOFError, OSError):
                return

    def send(self, rank: int, job_id: int, job: StageJob) -> None:
        self.jobs[rank].put(Run(job_id, job))

    def begin(self) -> None:
        self.control[0], self.control[1] = -1, 0
        for rank in range(self.world_size):
            self.positions[rank] = 0

    def stop_at(self, job: int, step: int) -> None:
        self.control[1] = step
        self.control[0] = job

    def furthest(self) -> int:
        return max(self.positions[:])

    def dead(self) -> list[tuple[int, str]]:
        return [(rank, f"(pid {p.pid}) exited with code {p.exitcode}") for rank, p in enumerate(self.processes)
                if not p.is_alive()]

    def late(self, ready: set[int], timeout: float) -> str:
        return f"worker ranks {sorted(set(range(self.world_size)) - ready)} were not ready within {timeout:g} s"

    def close(self, timeout: float) -> None:
        """Stops the processes, then releases the queues (their semaphores, pipes and feeder threads), the
        forwarding threads and the rendezvous folder: nothing of a start outlives it."""
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
            process.close()
        self.processes = []
        for thread in self.forwarders:
            thread.join()
        for channel in (*self.jobs, *self.outboxes):
            channel.close()
            channel.join_thread()
        self.jobs, self.outboxes, self.forwarders, self.control, self.positions = [], [], [], None, None
        shutil.rmtree(self.folder, ignore_errors=True)
