"""How a controller and its workers talk: spawned processes on this machine, or workers launched by torchrun (on
this machine or several) that attach over TCP.

Spawned (`SpawnedWorkers`, `LocalChannel`): torch.multiprocessing queues (result tensors travel in shared memory,
not pickled through a pipe) and two shared arrays, the stop step and each rank's step count, read and written on
the host.

Attached (`AttachedWorkers`, `SocketChannel`): the controller listens on HOST:PORT; each rank of a torchrun launch

    LTX2_WORKERS_KEY=secret torchrun --nnodes 1 --nproc-per-node 2 -m ltx2_core.runtime --connect HOST:PORT

connects (retrying until the controller listens), proves it knows the shared key (HMAC challenge of
multiprocessing.connection, before anything is unpickled), says its rank, and gets the `WorkerSpec` (model files,
layout, dtype) from the controller: the same launch serves any checkpoint, and the files must exist at the same path
on every machine. The group itself joins through torchrun's rendezvous (NCCL between GPUs, gloo on CPUs). Each rank
sends its step count per step, and the stop step comes back on the same connection, so an interrupt stops every
rank after the same step as in the spawned case. A worker exits when its controller disconnects (or asks it to);
torchrun's `--max-restarts` brings it back for the next attach.
"""

from __future__ import annotations

import os
import pickle
import queue
import socket
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener, answer_challenge, deliver_challenge

import torch.multiprocessing as mp

from ltx2_core.errors import LTX2Error
from ltx2_core.runtime.worker import StageJob, WorkerSpec, serve, worker_main

KEY_VARIABLE = "LTX2_WORKERS_KEY"
CONNECT_TIMEOUT = 600.0  # seconds an attaching worker keeps trying to reach its controller


class LinkError(LTX2Error, RuntimeError):
    """Controller and workers cannot be joined (address, key, or a launch that does not fit the layout)."""


def parse_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise LinkError(f"worker address must be HOST:PORT such as 127.0.0.1:29600, got {address!r}")
    return host, int(port)


def workers_key() -> bytes:
    key = os.environ.get(KEY_VARIABLE, "")
    if not key:
        raise LinkError(f"set {KEY_VARIABLE} to the same secret for the controller (ComfyUI) and every torchrun "
                        "launch of the workers; it authenticates them to each other")
    return key.encode()


def _send(connection: Connection, message) -> None:
    """By value (plain pickle): torch's reductions for multiprocessing would send shared-memory handles, which
    mean nothing on another machine."""
    connection.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def _recv(connection: Connection):
    return pickle.loads(connection.recv_bytes())


class LocalChannel:
    """A spawned worker's side: its job queue, the shared result queue and the shared arrays."""

    def __init__(self, jobs, results, control, positions) -> None:
        self.jobs, self.results, self.control, self.positions = jobs, results, control, positions
        self.parent = os.getppid()

    def get(self) -> tuple[int, StageJob] | None:
        return self.jobs.get()

    def put(self, message: tuple) -> None:
        self.results.put(message)

    def stop_step(self, job: int) -> int | None:
        return self.control[1] if self.control[0] == job else None

    def reached(self, rank: int, steps: int) -> None:
        self.positions[rank] = steps

    def connected(self) -> bool:
        return os.getppid() == self.parent


class SocketChannel:
    """An attached worker's side: one connection to the controller, read by a thread (jobs, stop steps)."""

    def __init__(self, connection: Connection) -> None:
        self.connection, self.lock, self.jobs = connection, threading.Lock(), queue.Queue()
        self.stop: tuple[int, int] = (-1, 0)
        self.open, self.closing = True, False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            while (message := _recv(self.connection)) is not None:
                if message[0] == "stop":
                    self.stop = message[1:]
                else:
                    self.jobs.put(message[1:])
            self.closing = True  # asked to stop: the worker finishes cleanly
        except Exception:  # the controller is gone (or sent what cannot be read): this worker ends
            self.open = False
        self.jobs.put(None)

    def get(self) -> tuple[int, StageJob] | None:
        return self.jobs.get()

    def put(self, message: tuple) -> None:
        try:
            with self.lock:
                _send(self.connection, message)
        except OSError:
            self.open = False

    def stop_step(self, job: int) -> int | None:
        return self.stop[1] if self.stop[0] == job else None

    def reached(self, rank: int, steps: int) -> None:
        self.put(("position", rank, steps))

    def connected(self) -> bool:
        return self.open or self.closing


def attach(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """The body of one torchrun-launched worker: reach the controller, get the spec, serve its jobs. Started
    without torchrun, it is a group of one (for a one-device layout on another machine)."""
    if "WORLD_SIZE" not in os.environ:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    rank, world, local_rank = (int(os.environ.get(name, default)) for name, default in
                               (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")))
    host, port, key = *parse_address(address), workers_key()
    deadline = time.monotonic() + timeout
    while True:
        try:
            connection = Client((host, port), authkey=key)
            break
        except (ConnectionRefusedError, socket.timeout, OSError):
            if time.monotonic() > deadline:
                raise LinkError(f"no controller listens on {address} after {timeout:g} s; start ComfyUI (or the "
                                "caller) with this worker address first")
            time.sleep(1.0)
    _send(connection, ("hello", rank, world, os.getpid(), socket.gethostname()))
    answer = _recv(connection)
    if answer[0] != "spec":
        raise LinkError(f"rank {rank}: the controller refused this worker: {answer[1]}")
    serve(rank, local_rank, answer[1], SocketChannel(connection))


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
        # a result queue per rank: a rank stopped while writing would block the others' messages on a shared one
        outboxes = [context.Queue() for _ in range(self.world_size)]
        self.results: queue.Queue = queue.Queue()
        self.jobs = [context.Queue() for _ in range(self.world_size)]
        self.control = context.Array("q", [-1, 0], lock=False)  # (job, stop after this many steps)
        self.positions = context.Array("q", [0] * self.world_size, lock=False)
        self.processes = [context.Process(target=worker_main, daemon=True, name=f"ltx2-worker-{rank}",
                                          args=(rank, spec, self.jobs[rank], outboxes[rank], self.control,
                                                self.positions))
                          for rank in range(self.world_size)]
        with hide_main():
            for process in self.processes:
                process.start()
        for outbox, process in zip(outboxes, self.processes):
            threading.Thread(target=self._forward, args=(outbox, process), daemon=True).start()

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
        self.jobs[rank].put((job_id, job))

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

    def close(self, timeout: float) -> None:
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


class AttachedWorkers:
    """The controller's side of torchrun-launched workers: it listens on `address` and each rank connects."""

    def __init__(self, address: str, world_size: int) -> None:
        self.address, self.world_size = parse_address(address), world_size
        self.key = workers_key()
        self.listener: Listener | None = None
        self.connections: dict[int, Connection] = {}
        self.hosts: dict[int, tuple[str, int]] = {}

    @property
    def active(self) -> bool:
        return self.listener is not None

    @property
    def pids(self) -> list[int]:
        return [self.hosts[rank][1] for rank in sorted(self.hosts)]

    def launch(self, spec: WorkerSpec, hide_main) -> None:
        self.results: queue.Queue = queue.Queue()
        self.positions = [0] * self.world_size
        self.lost: dict[int, str] = {}
        self.lock = threading.Lock()
        self.listener = Listener(self.address, authkey=None)
        threading.Thread(target=self._accept, args=(self.listener, spec._replace(init_file=None)),
                         daemon=True).start()

    def _accept(self, listener: Listener, spec: WorkerSpec) -> None:
        """Takes connections until every rank is in: authenticated, then its rank checked, then the spec sent."""
        while len(self.connections) < self.world_size:
            try:
                connection = listener.accept()
                deliver_challenge(connection, self.key)
                answer_challenge(connection, self.key)
                _, rank, world, pid, host = _recv(connection)
            except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError,
                    AuthenticationError) as exc:  # closed, or a stranger without the key
                if self.listener is not listener:
                    return
                self.results.put(("note", -1, f"a connection was refused: {exc!r}"))
                continue
            if world != self.world_size or not 0 <= rank < self.world_size or rank in self.connections:
                why = (f"this torchrun launch has {world} ranks (rank {rank}) but the layout {spec.layout} needs "
                       f"{self.world_size}; launch torchrun with {self.world_size} processes in all")
                _send(connection, ("refused", why))
                connection.close()
                self.results.put(("error", max(rank, 0), None, "LinkError: " + why))
                continue
            self.connections[rank], self.hosts[rank] = connection, (host, pid)
            _send(connection, ("spec", spec))
            threading.Thread(target=self._read, args=(rank, connection), daemon=True).start()

    def _read(self, rank: int, connection: Connection) -> None:
        host, pid = self.hosts[rank]
        try:
            while True:
                message = _recv(connection)
                if message[0] == "position":
                    self.positions[rank] = message[2]
                else:
                    self.results.put(message)
        except Exception as exc:  # EOF: the worker is gone; anything else: it cannot be understood
            self.lost[rank] = f"on {host} (pid {pid}) disconnected ({exc!r})"

    def _send(self, rank: int, message) -> None:
        try:
            with self.lock:
                _send(self.connections[rank], message)
        except (OSError, KeyError):
            self.lost.setdefault(rank, "could not be reached")

    def send(self, rank: int, job_id: int, job: StageJob) -> None:
        self._send(rank, ("job", job_id, job))

    def begin(self) -> None:
        self.positions = [0] * self.world_size

    def stop_at(self, job: int, step: int) -> None:
        for rank in list(self.connections):
            self._send(rank, ("stop", job, step))

    def furthest(self) -> int:
        return max(self.positions)

    def dead(self) -> list[tuple[int, str]]:
        return sorted(self.lost.items())

    def close(self, timeout: float) -> None:
        listener, self.listener = self.listener, None
        for rank in list(self.connections):
            if rank not in self.lost:
                self._send(rank, None)
        for connection in self.connections.values():
            connection.close()
        self.connections, self.hosts = {}, {}
        if listener is not None:
            listener.close()
