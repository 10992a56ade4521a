"""How a controller and its spawned workers (one process per device on this machine) talk: a pipe each way per rank
(result tensors travel in shared memory, not pickled through the pipe) and two shared arrays, the stop point and
each rank's count of stop points, read and written on the host. Nothing of it is named in the file system: no
semaphore (multiprocessing's queues hold named ones, which a caller killed by SIGTERM leaked), and the rendezvous
folder is removed by the controller, or by the workers when their caller is gone (killed, so it could not)."""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import tempfile
import threading
import time
from multiprocessing.connection import Connection

import torch.multiprocessing as mp

from ltx2_core.parallel.launch import leave
from ltx2_core.runtime.protocol import Run, StageJob, Task, WorkerMessage, WorkerSpec
from ltx2_core.runtime.worker import serve


class LocalChannel:
    """A spawned worker's side: its end of the job pipe and of the result pipe, and the shared arrays."""

    def __init__(self, jobs: Connection, results: Connection, control, positions, folder: str) -> None:
        self.jobs, self.results, self.control, self.positions = jobs, results, control, positions
        self.parent, self.folder, self.lock = os.getppid(), folder, threading.Lock()

    def get(self) -> Run | None:
        try:
            return self.jobs.recv()
        except EOFError:  # the caller is gone
            return None

    def put(self, message: WorkerMessage) -> None:
        with self.lock, contextlib.suppress(OSError):  # the heartbeat and the job share the pipe; OSError: gone
            self.results.send(message)

    def stop_point(self, job: int) -> int | None:
        return self.control[1] if self.control[0] == job else None

    def reached(self, rank: int, points: int) -> None:
        self.positions[rank] = points

    def connected(self) -> bool:
        return os.getppid() == self.parent

    def abandoned(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def worker_main(rank: int, spec: WorkerSpec, jobs: Connection, results: Connection, control, positions) -> None:
    """A spawned worker's body (its group joins through `spec.init_file`, in the folder its caller made)."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(spec.layout.world_size), LOCAL_RANK=str(rank))
    channel = LocalChannel(jobs, results, control, positions, os.path.dirname(spec.init_file))
    serve(rank, rank, spec, channel)
    leave()
    if not channel.connected():
        channel.abandoned()


class SpawnedWorkers:
    """The controller's side of one process per device on this machine."""

    replaceable = False  # a dead one is never started again alone: they all start again
    lead = 0.05  # seconds a stop may take to reach every rank (shared memory; a descheduled controller)

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
        # a result pipe per rank: a rank stopped while writing would block the others' messages on a shared one
        inboxes, self.jobs = zip(*(context.Pipe(duplex=False) for _ in range(self.world_size)))
        self.outboxes, sent = zip(*(context.Pipe(duplex=False) for _ in range(self.world_size)))
        self.results: queue.Queue = queue.Queue()
        self.control = context.Array("q", [-1, 0], lock=False)  # (job, stop at this stop point)
        self.positions = context.Array("q", [0] * self.world_size, lock=False)
        self.processes = [context.Process(target=worker_main, daemon=True, name=f"ltx2-worker-{rank}",
                                          args=(rank, spec, inboxes[rank], sent[rank], self.control,
                                                self.positions))
                          for rank in range(self.world_size)]
        with hide_main():
            for process in self.processes:
                process.start()
        for end in (*inboxes, *sent):  # the workers' ends: a pipe then ends when its worker does
            end.close()
        self.forwarders = [threading.Thread(target=self._forward, args=(outbox, process), daemon=True)
                           for outbox, process in zip(self.outboxes, self.processes)]
        for thread in self.forwarders:
            thread.start()

    def _forward(self, outbox: Connection, process) -> None:
        """Moves one rank's messages into `results` while its process runs (a child of the worker may hold the
        pipe open after it ends)."""
        while process in self.processes:
            try:
                if outbox.poll(0.5):
                    self.results.put(outbox.recv())
            except Exception:  # EOF: the worker ended (or died inside a message)
                return

    def send(self, rank: int, job_id: int, job: StageJob | Task) -> None:
        with contextlib.suppress(OSError):  # a dead worker: the controller finds out from its exit code
            self.jobs[rank].send(Run(job_id, job))

    def begin(self) -> None:
        self.control[0], self.control[1] = -1, 0
        for rank in range(self.world_size):
            self.positions[rank] = 0

    def stop_at(self, job: int, point: int) -> None:
        self.control[1] = point
        self.control[0] = job

    def furthest(self) -> int:
        return max(self.positions[:])

    def dead(self) -> list[tuple[int, str]]:
        return [(rank, f"(pid {p.pid}) exited with code {p.exitcode}") for rank, p in enumerate(self.processes)
                if not p.is_alive()]

    def late(self, ready: set[int], timeout: float) -> str:
        return f"worker ranks {sorted(set(range(self.world_size)) - ready)} were not ready within {timeout:g} s"

    def close(self, timeout: float) -> None:
        """Stops the processes, then releases the pipes, the forwarding threads and the rendezvous folder: nothing
        of a start outlives it."""
        if not self.processes:
            return
        for jobs, process in zip(self.jobs, self.processes):
            if process.is_alive():
                with contextlib.suppress(OSError):
                    jobs.send(None)
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
        for end in (*self.jobs, *self.outboxes):
            end.close()
        self.jobs, self.outboxes, self.forwarders, self.control, self.positions = [], [], [], None, None
        shutil.rmtree(self.folder, ignore_errors=True)
