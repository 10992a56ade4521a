"""The controller's side of workers launched by torchrun (on this machine or several) that attach over TCP
(`ltx2_core.runtime.links` has the line and the workers' side): it listens on HOST:PORT, authenticates each
connection on its own thread, takes it as the rank it says, sends it the `WorkerSpec`, and reads its messages.

A rank that connects in the place of a stale one replaces it: torchrun starts the whole launch again when one of its
workers dies (`--max-restarts`), also while idle, and the restarted ranks take the dead ones' places. A rank still
held by a live process is refused, naming that process.
"""

from __future__ import annotations

import contextlib
import pickle
import queue
import socket
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge

from ltx2_core.runtime import links
from ltx2_core.runtime.links import HANDSHAKE_TIMEOUT, KEY_VARIABLE, POLL, LinkError, parse_address, workers_key
from ltx2_core.runtime.protocol import (
    Error,
    Hello,
    Note,
    Position,
    Ready,
    Refused,
    Run,
    Spec,
    StageJob,
    Stop,
    Task,
    WorkerSpec,
)
from ltx2_core.runtime.worker import HEARTBEAT

STALE_AFTER = 3 * HEARTBEAT  # seconds without a word after which a rank's connection is stale (it beats every 2 s)


class AttachedWorkers:
    """The controller's side of torchrun-launched workers: it listens on `address` and each rank connects. A rank
    that connects in the place of a stale one (its connection lost, or silent for STALE_AFTER s: torchrun started
    the launch again after a worker died) replaces it."""

    replaceable = True  # a lost rank comes back when torchrun starts its launch again
    lead = 0.25  # seconds, counted generously, a stop takes to reach every rank over the network

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
        self.heard: dict[int, float] = {}  # when each rank's connection last said something
        self.ready: set[int] = set()  # the ranks whose connection reported Ready
        self.lock = threading.Lock()
        host, port = self.address
        try:
            self.server = socket.create_server(self.address, backlog=64)
        except OSError as exc:
            raise LinkError(f"cannot listen for workers on {host}:{port}: {exc.strerror} (another program or "
                            "controller uses it); pick a free port for the worker address") from None
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
        """Authenticates one connection within HANDSHAKE_TIMEOUT, then takes its rank and sends it the spec."""
        try:
            links.time_limit(connection, HANDSHAKE_TIMEOUT)
            deliver_challenge(connection, self.key)
            answer_challenge(connection, self.key)
            hello = links.receive(connection)
            if not isinstance(hello, Hello):
                raise TypeError(f"a connection said {type(hello).__name__} where a worker says Hello")
            links.time_limit(connection, 0)
        except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError,
                AuthenticationError) as exc:  # a stranger without the key, or silent
            connection.close()
            self.results.put(Note(f"a connection was refused: {exc!r}"))
            return
        why = self._admit(hello, connection, spec)
        if why != "":  # "": this controller is closing; the worker tries again, and finds the next one
            with contextlib.suppress(OSError):  # a worker gone meanwhile: its reader finds out
                links.send(connection, Spec(spec) if why is None else Refused(why))
        if why is None:
            self._read(hello.rank, connection)
            return
        if why:
            self.results.put(Error(min(max(hello.rank, 0), self.world_size - 1), None, "LinkError: " + why))
        connection.close()

    def _admit(self, hello: Hello, connection: Connection, spec: WorkerSpec) -> str | None:
        """Takes `connection` as rank `hello.rank`, in the place of a stale connection of that rank, waiting up to
        STALE_AFTER s for one that still looks alive to go stale. None: taken; else why not ("": closing)."""
        rank, world = hello.rank, hello.world
        if world != self.world_size or not 0 <= rank < self.world_size:
            return (f"this torchrun launch has {world} rank{'s' * (world != 1)} (rank {rank}) but the layout "
                    f"{spec.layout} needs {self.world_size}; launch torchrun with {self.world_size} processes in all")
        deadline = time.monotonic() + STALE_AFTER
        while time.monotonic() < deadline:
            with self.lock:
                if self.server is None:
                    return ""
                old = self.connections.get(rank)
                if old is None or rank in self.lost or time.monotonic() - self.heard[rank] > STALE_AFTER:
                    self.connections[rank], self.hosts[rank] = connection, (hello.host, hello.pid)
                    self.heard[rank], self.positions[rank] = time.monotonic(), 0
                    self.lost.pop(rank, None)
                    self.ready.discard(rank)
                    if old is not None:
                        links.cut(old)  # its reader thread ends without a word
                    return None
            time.sleep(POLL)
        host, pid = self.hosts[rank]
        return (f"rank {rank} is still held by pid {pid} on {host}, which is alive: a stale worker of an earlier "
                "launch, or a second launch on this address; stop that process, then launch torchrun again")

    def _read(self, rank: int, connection: Connection) -> None:
        host, pid = self.hosts[rank]
        try:
            while True:
                message = links.receive(connection)
                if self.connections.get(rank) is not connection:
                    return  # replaced
                self.heard[rank] = time.monotonic()
                if isinstance(message, Position):
                    self.positions[rank] = message.points
                    continue
                if isinstance(message, Ready):
                    self.ready.add(rank)
                self.results.put(message)
        except Exception as exc:  # EOF: the worker is gone; anything else: it cannot be understood
            with self.lock:
                if self.connections.get(rank) is connection:
                    self.lost[rank] = f"on {host} (pid {pid}) disconnected ({exc!r})"

    def _send(self, rank: int, message) -> None:
        try:
            with self.lock:
                links.send(self.connections[rank], message)
        except (OSError, KeyError):
            self.lost.setdefault(rank, "could not be reached")

    def send(self, rank: int, job_id: int, job: StageJob | Task) -> None:
        self._send(rank, Run(job_id, job))

    def begin(self) -> None:
        self.positions = [0] * self.world_size

    def stop_at(self, job: int, point: int) -> None:
        for rank in list(self.connections):
            self._send(rank, Stop(job, point))

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
            links.cut(connection)
        deadline = time.monotonic() + 1.0  # a stranger's handshake ends by itself within HANDSHAKE_TIMEOUT
        for thread in self.threads:
            thread.join(max(deadline - time.monotonic(), 0.0))
        self.connections, self.hosts, self.threads = {}, {}, []
