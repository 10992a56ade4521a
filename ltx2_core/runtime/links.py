"""How a controller and workers launched by torchrun (on this machine or several) talk over TCP (spawned workers:
`ltx2_core.runtime.spawned`).

The controller listens on HOST:PORT (`AttachedWorkers`); each rank of a torchrun launch

    LTX2_WORKERS_KEY=secret torchrun --nnodes 1 --nproc-per-node 2 -m ltx2_core.runtime --connect HOST:PORT

connects (retrying until the controller listens), proves it knows the shared key (HMAC challenge of
multiprocessing.connection, before anything is unpickled), says its rank, and gets the `WorkerSpec` (model files,
layout, dtype) from the controller: the same launch serves any checkpoint, and the files must exist at the same path
on every machine. Each connection is authenticated on its own thread within HANDSHAKE_TIMEOUT, so a silent stranger
on the port delays no worker. The group itself joins through torchrun's rendezvous (NCCL between GPUs, gloo on
CPUs). Each rank sends its step count per step, and the stop step comes back on the same connection
(`SocketChannel`), so an interrupt stops every rank after the same step as in the spawned case. When its controller
goes away (shutdown, unload, a fault), an idle worker keeps its group and waits for the next controller (it reloads
only when the next one asks for other files or another layout); a worker that was inside a job then exits with
status 1, so torchrun's `--max-restarts` starts the launch again.

Why this, and not torch.distributed's TCPStore as the line: the store has no authentication, so every value would
need our own signing and replay checks; multiprocessing.connection authenticates before anything is unpickled and
the connection itself tells a worker its controller is gone. The group, its rendezvous and its timeouts are
torchrun's.
"""

from __future__ import annotations

import os
import pickle
import queue
import socket
import struct
import sys
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, answer_challenge, deliver_challenge

from ltx2_core.errors import LTX2Error
from ltx2_core.runtime.protocol import (
    Error,
    Hello,
    Note,
    Position,
    Refused,
    Run,
    Spec,
    StageJob,
    Stop,
    WorkerMessage,
    WorkerSpec,
)
from ltx2_core.runtime.worker import Loaded, serve

KEY_VARIABLE = "LTX2_WORKERS_KEY"
CONNECT_TIMEOUT = 600.0  # seconds an attaching worker keeps trying to reach its first controller
HANDSHAKE_TIMEOUT = 10.0  # seconds a connection to the controller's port has to authenticate and say its rank
POLL = 0.2  # seconds between checks of a closed listener


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


class SocketChannel:
    """An attached worker's side: one connection to the controller, read by a thread (jobs, stop steps)."""

    def __init__(self, connection: Connection) -> None:
        self.connection, self.lock, self.jobs = connection, threading.Lock(), queue.Queue()
        self.stop = Stop(-1, 0)
        self.open, self.busy = True, False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            while (message := _recv(self.connection)) is not None:
                if isinstance(message, Stop):
                    self.stop = message
                elif isinstance(message, Run):
                    self.jobs.put(message)
        except Exception:  # the controller is gone (or sent what cannot be read)
            pass
        self.open = False
        self.jobs.put(None)

    def get(self) -> Run | None:
        self.busy = False
        message = self.jobs.get()
        self.busy = message is not None
        return message

    def put(self, message: WorkerMessage | Position) -> None:
        try:
            with self.lock:
                _send(self.connection, message)
        except OSError:
            self.open = False

    def stop_step(self, job: int) -> int | None:
        return self.stop.step if self.stop.job == job else None

    def reached(self, rank: int, steps: int) -> None:
        self.put(Position(rank, steps))

    def connected(self) -> bool:
        """An idle worker outlives its controller (it waits for the next); a busy one cannot finish its job."""
        return self.open or not self.busy


def attach(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """The body of one torchrun-launched worker: reach the controller, get the spec, serve its jobs; then wait for
    the next controller, for good. Started without torchrun, it is a group of one (for a one-device layout on
    another machine). LinkError when no controller listens within `timeout` seconds of the start, or when the
    controller refuses this launch."""
    if "WORLD_SIZE" not in os.environ:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    rank, world, local_rank = (int(os.environ.get(name, default)) for name, default in
                               (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")))
    host, port, key = *parse_address(address), workers_key()
    loaded: Loaded | None = None
    deadline: float | None = time.monotonic() + timeout
    while True:
        connection = _connect(host, port, key, deadline, address, timeout)
        try:
            _send(connection, Hello(rank, world, os.getpid(), socket.gethostname()))
            answer = _recv(connection)
        except (OSError, EOFError):  # the controller went away before answering: wait for the next one
            connection.close()
            continue
        if isinstance(answer, Refused):
            raise LinkError(f"rank {rank}: the controller refused this worker: {answer.why}")
        if loaded is not None and loaded.spec != answer.spec:
            loaded = None  # the previous shard goes before the next one loads
        loaded = serve(rank, local_rank, answer.spec, SocketChannel(connection), loaded)
        _cut(connection)
        deadline = None  # from now on it waits for the next controller as long as it takes


def _connect(host: str, port: int, key: bytes, deadline: float | None, address: str, timeout: float
             ) -> Connection:
    while True:
        try:
            return Client((host, port), authkey=key)
        except (OSError, EOFError):
            if deadline is not None and time.monotonic() > deadline:
                raise LinkError(f"no controller listens on {address} after {timeout:g} s; start ComfyUI (or the "
                                "caller) with this worker address first")
            time.sleep(1.0)


def _time_limit(connection: Connection, seconds: float) -> None:
    """Blocking reads and writes on `connection` fail after `seconds` (0: never)."""
    value = (struct.pack("I", int(seconds * 1000)) if sys.platform == "win32" else
             struct.pack("ll", int(seconds), int(seconds % 1 * 1e6)))
    sock = socket.socket(fileno=connection.fileno())
    try:
        for option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):
            sock.setsockopt(socket.SOL_SOCKET, option, value)
    finally:
        sock.detach()


def _cut(connection: Connection) -> None:
    """Closes `connection`, waking a thread blocked reading it (a plain close does not)."""
    sock = socket.socket(fileno=connection.fileno())
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already disconnected
        pass
    finally:
        sock.detach()
    connection.close()


class AttachedWorkers:
    """The controller's side of torchrun-launched workers: it listens on `address` and each rank connects."""

    def __init__(self, address: str, world_size: int) -> None:
        self.address, self.world_size = parse_address(address), world_size
        self.key = workers_key()
        self.server: socket.socket | None = None
        self.connections: dict[int, Connection] = {}
        self.hosts: dict[int, tuple[str, int]] = {}
        self.threads: list[threading.Thread] = []

    @property
    def active(self) -> bool:
        return self.server is not None

    @property
    def pids(self) -> list[int]:
        return [self.hosts[rank][1] for rank in sorted(self.hosts)]

    def launch(self, spec: WorkerSpec, hide_main) -> None:
        self.results: queue.Queue = queue.Queue()
        self.positions = [0] * self.world_size
        self.lost: dict[int, str] = {}
        self.lock = threading.Lock()
        self.server = socket.create_server(self.address, backlog=64)
        self.server.settimeout(POLL)
        self._thread(self._accept, self.server, spec)

    def _thread(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self.threads.append(thread)
        thread.start()

    def _accept(self, server: socket.socket, spec: WorkerSpec) -> None:
        """Takes connections until closed; each one is checked on its own thread."""
        while self.server is server:
            try:
                sock, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.setblocking(True)
            self._thread(self._handshake, Connection(sock.detach()), spec)

    def _handshake(self, connection: Connection, spec: WorkerSpec) -> None:
        """Authenticates one connection within HANDSHAKE_TIMEOUT, then checks its rank and sends it the spec."""
        try:
            _time_limit(connection, HANDSHAKE_TIMEOUT)
            deliver_challenge(connection, self.key)
            answer_challenge(connection, self.key)
            hello = _recv(connection)
            if not isinstance(hello, Hello):
                raise TypeError(f"a connection said {type(hello).__name__} where a worker says Hello")
            rank, world = hello.rank, hello.world
            _time_limit(connection, 0)
        except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError,
                AuthenticationError) as exc:  # a stranger without the key, or silent
            connection.close()
            self.results.put(Note(f"a connection was refused: {exc!r}"))
            return
        with self.lock:
            closed, taken = self.server is None, rank in self.connections
            if world == self.world_size and 0 <= rank < self.world_size and not taken and not closed:
                self.connections[rank], self.hosts[rank] = connection, (hello.host, hello.pid)
        if closed:  # this controller is closing: the worker tries again, and finds the next one
            connection.close()
            return
        if world != self.world_size or not 0 <= rank < self.world_size or taken:
            why = (f"this torchrun launch has {world} rank{'s' * (world != 1)} (rank {rank}) but the layout "
                   f"{spec.layout} needs {self.world_size}; launch torchrun with {self.world_size} processes in all")
            _send(connection, Refused(why))
            connection.close()
            self.results.put(Error(max(rank, 0), None, "LinkError: " + why))
            return
        _send(connection, Spec(spec))
        self._read(rank, connection)

    def _read(self, rank: int, connection: Connection) -> None:
        host, pid = self.hosts[rank]
        try:
            while True:
                message = _recv(connection)
                if isinstance(message, Position):
                    self.positions[rank] = message.steps
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
        self._send(rank, Run(job_id, job))

    def begin(self) -> None:
        self.positions = [0] * self.world_size

    def stop_at(self, job: int, step: int) -> None:
        for rank in list(self.connections):
            self._send(rank, Stop(job, step))

    def furthest(self) -> int:
        return max(self.positions)

    def dead(self) -> list[tuple[int, str]]:
        return sorted(self.lost.items())

    def late(self, ready: set[int], timeout: float) -> str:
        missing = sorted(set(range(self.world_size)) - set(self.connections))
        if missing:
            host, port = self.address
            return (f"no worker connected to {host}:{port} within {timeout:g} s (ranks {missing} missing); start "
                    f"the torchrun launch (`torchrun ... -m ltx2_core.runtime --connect {host}:{port}`, "
                    f"{self.world_size} processes in all) with the same {KEY_VARIABLE}")
        return f"worker ranks {sorted(set(range(self.world_size)) - ready)} were not ready within {timeout:g} s"

    def close(self, timeout: float) -> None:
        with self.lock:
            server, self.server = self.server, None
        if server is None:
            return
        server.close()
        for rank in list(self.connections):
            if rank not in self.lost:
                self._send(rank, None)
        for connection in self.connections.values():
            _cut(connection)
        deadline = time.monotonic() + 1.0  # a stranger's handshake ends by itself within HANDSHAKE_TIMEOUT
        for thread in self.threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
        self.connections, self.hosts, self.threads = {}, {}, []
