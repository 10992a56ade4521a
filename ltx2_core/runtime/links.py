"""How a controller and workers launched by torchrun (on this machine or several) talk over TCP (spawned workers:
`ltx2_core.runtime.spawned`).

The controller listens on HOST:PORT (`ltx2_core.runtime.attached.AttachedWorkers`); each rank of a torchrun launch

    LTX2_WORKERS_KEY=secret torchrun --nnodes 1 --nproc-per-node 2 -m ltx2_core.runtime --connect HOST:PORT

connects (retrying until the controller listens), proves it knows the shared key (HMAC challenge of
multiprocessing.connection, before anything is unpickled), says its rank, and gets the `WorkerSpec` (model files,
layout, dtype) from the controller: the same launch serves any checkpoint, and the files must exist at the same path
on every machine. Each connection is authenticated on its own thread within HANDSHAKE_TIMEOUT, so a silent stranger
on the port delays no worker. The group itself joins through torchrun's rendezvous (NCCL between GPUs, gloo on
CPUs). Each rank sends its count of stop points (the reads of its `should_stop`, before every step and transformer
block), and the stop point comes back on the same connection (`SocketChannel`), so an interrupt stops every rank at
the same point as in the spawned case. When its controller goes away (shutdown, unload, a fault), an idle worker
keeps its group and waits for the next controller (it reloads only when the next one asks for other files or another
layout); a worker that was inside a job then exits with status 1, so torchrun's `--max-restarts` starts the launch
again, and the restarted ranks take the dead ones' places. Something else on the port (another program, or a
controller with another key) is tried again for STRANGER_TIMEOUT s, then the worker says so in one line.

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
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge

from ltx2_core.errors import LTX2Error
from ltx2_core.runtime.protocol import Hello, Position, Refused, Run, Stop, WorkerMessage
from ltx2_core.runtime.worker import Loaded, serve

KEY_VARIABLE = "LTX2_WORKERS_KEY"
CONNECT_TIMEOUT = 600.0  # seconds an attaching worker keeps trying to reach its first controller
HANDSHAKE_TIMEOUT = 10.0  # seconds a connection to the controller's port has to authenticate and say its rank
STRANGER_TIMEOUT = 30.0  # seconds a worker tries again a port where something else than a controller answers
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


def send(connection: Connection, message) -> None:
    """By value (plain pickle): torch's reductions for multiprocessing would send shared-memory handles, which
    mean nothing on another machine."""
    connection.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def receive(connection: Connection):
    return pickle.loads(connection.recv_bytes())


class SocketChannel:
    """An attached worker's side: one connection to the controller, read by a thread (jobs, stop points)."""

    def __init__(self, connection: Connection) -> None:
        self.connection, self.lock, self.jobs = connection, threading.Lock(), queue.Queue()
        self.stop = Stop(-1, 0)
        self.open, self.busy = True, False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            while (message := receive(self.connection)) is not None:
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
                send(self.connection, message)
        except OSError:
            self.open = False

    def stop_point(self, job: int) -> int | None:
        return self.stop.point if self.stop.job == job else None

    def reached(self, rank: int, points: int) -> None:
        self.put(Position(rank, points))

    def connected(self) -> bool:
        """An idle worker outlives its controller (it waits for the next); a busy one cannot finish its job."""
        return self.open or not self.busy

    def abandoned(self) -> None:
        """Nothing of the controller's lives with an attached worker."""


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
            send(connection, Hello(rank, world, os.getpid(), socket.gethostname()))
            answer = receive(connection)
        except (OSError, EOFError):  # the controller went away before answering: wait for the next one
            connection.close()
            continue
        if isinstance(answer, Refused):
            raise LinkError(f"rank {rank}: the controller refused this worker: {answer.why}")
        if loaded is not None and loaded.spec != answer.spec:
            loaded = None  # the previous shard goes before the next one loads
        loaded = serve(rank, local_rank, answer.spec, SocketChannel(connection), loaded)
        cut(connection)
        deadline = None  # from now on it waits for the next controller as long as it takes


def _connect(host: str, port: int, key: bytes, deadline: float | None, address: str, timeout: float
             ) -> Connection:
    """The controller's connection, authenticated. Nothing listening is waited for (until `deadline`, None: for
    ever); a peer that does not answer as a controller (another program on the port) or refuses the key is tried
    again for up to STRANGER_TIMEOUT s (no longer than `deadline`), then LinkError says which."""
    wrong_since: float | None = None
    while True:
        try:
            return _client(host, port, key, address)
        except LinkError:
            wrong_since = wrong_since or time.monotonic()
            until = wrong_since + STRANGER_TIMEOUT
            if time.monotonic() > (until if deadline is None else min(until, deadline)):
                raise
        except OSError:  # nothing listens (yet)
            wrong_since = None
            if deadline is not None and time.monotonic() > deadline:
                raise LinkError(f"no controller listens on {address} after {timeout:g} s; start ComfyUI (or the "
                                "caller) with this worker address first") from None
        time.sleep(1.0)


def _client(host: str, port: int, key: bytes, address: str) -> Connection:
    """`multiprocessing.connection.Client((host, port), authkey=key)` whose handshake ends within HANDSHAKE_TIMEOUT;
    OSError when nothing listens, LinkError when the peer is no controller this worker may join."""
    sock = socket.create_connection((host, port), timeout=HANDSHAKE_TIMEOUT)
    sock.setblocking(True)  # Connection reads and writes the descriptor itself; time_limit bounds the handshake
    connection = Connection(sock.detach())
    try:
        time_limit(connection, HANDSHAKE_TIMEOUT)
        answer_challenge(connection, key)
        deliver_challenge(connection, key)
        time_limit(connection, 0)
        return connection
    except AuthenticationError:
        connection.close()
        raise LinkError(f"what listens on {address} did not accept this worker's key (a controller with another "
                        f"{KEY_VARIABLE}, or another program); give the workers ComfyUI's {KEY_VARIABLE} and "
                        "worker address") from None
    except (AssertionError, OSError, EOFError) as exc:  # answer_challenge asserts on a stranger's bytes
        connection.close()
        raise LinkError(f"something else listens on {address}: it did not answer as an LTX-2 controller "
                        f"({type(exc).__name__}); give ComfyUI and the workers a free port as the worker "
                        "address") from None


def time_limit(connection: Connection, seconds: float) -> None:
    """Blocking reads and writes on `connection` fail after `seconds` (0: never)."""
    value = (struct.pack("I", int(seconds * 1000)) if sys.platform == "win32" else
             struct.pack("ll", int(seconds), int(seconds % 1 * 1e6)))
    sock = socket.socket(fileno=connection.fileno())
    try:
        for option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):
            sock.setsockopt(socket.SOL_SOCKET, option, value)
    finally:
        sock.detach()


def cut(connection: Connection) -> None:
    """Closes `connection`, waking a thread blocked reading it (a plain close does not)."""
    sock = socket.socket(fileno=connection.fileno())
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already disconnected
        pass
    finally:
        sock.detach()
    connection.close()
