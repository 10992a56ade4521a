"""Workers that attach over TCP (`python -m ltx2_core.runtime --connect HOST:PORT`, here one process without
torchrun: a group of one, or a torchrun launch of two): a silent connection to the port delays no worker, a second
worker for a rank that is held is refused naming the holder, a worker outlives its controller and serves the next
one on the same address, a rank that dies between jobs is replaced by torchrun's restart, and a controller that no
worker reaches, a port another program holds, or a worker that finds something else on the port says so in one
line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

import torch

from ltx2_core import ModelFiles, Request
from ltx2_core.demo import demo_models
from ltx2_core.parallel import ParallelConfig
from ltx2_core.runtime import Controller, WorkerError, generate_on_workers
from ltx2_core.runtime.links import LinkError
from support.workers import REQUEST as TWO_STEPS  # the request of the `local` fixture
from support.workers import run_on

ROOT = Path(__file__).resolve().parents[2]
REQUEST = Request("a red car in the rain", width=96, height=64, frames=9, steps=1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def address(monkeypatch) -> str:
    monkeypatch.setenv("LTX2_WORKERS_KEY", "test-secret")
    return f"127.0.0.1:{_free_port()}"


def _worker(address: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ltx2_core.runtime", "--connect", address], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _stranger(host: str, port: int) -> socket.socket:
    """A connection to the controller's port that says nothing (made as soon as the controller listens)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return socket.create_connection((host, port), timeout=60)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_a_silent_stranger_on_the_port_delays_no_worker_and_the_worker_serves_the_next_controller(address):
    models = demo_models("2.0")._replace(transformer=None)
    host, port = address.rsplit(":", 1)
    first = Controller(ModelFiles(), ParallelConfig(), threads=1, attach=address, start_timeout=60)
    starting = threading.Thread(target=first.start)
    starting.start()
    worker = None
    try:
        with _stranger(host, int(port)) as stranger:  # in first, then silent
            worker = _worker(address)
            starting.join()
            assert first.pids == [worker.pid]
            generate_on_workers(first, REQUEST, models)
            assert stranger.recv(64)  # it was offered the challenge (and is cut off after HANDSHAKE_TIMEOUT)
            second_launch = _worker(address)  # rank 0 again, while the first one lives: refused, naming it
            assert second_launch.wait(timeout=120) == 2
            said = second_launch.communicate()[0]
            assert f"rank 0 is still held by pid {worker.pid}" in said and "Traceback" not in said, said
        first.shutdown()
        time.sleep(2)
        assert worker.poll() is None  # waiting for the next controller, not gone
        second = Controller(ModelFiles(), ParallelConfig(), threads=1, attach=address, start_timeout=60)
        try:
            generate_on_workers(second, REQUEST, models)
            assert second.pids == [worker.pid]  # the same process, which kept its group and shard
        finally:
            second.shutdown()
    finally:
        first.shutdown()
        if worker is not None:
            worker.kill()
            output = worker.communicate()[0]
            assert "error" not in output.lower(), output[-2000:]


@pytest.mark.parametrize("peer", ["answers garbage", "is silent"])
def test_a_worker_that_finds_something_else_on_the_port_says_so_in_one_line(peer):
    """Another program on the workers' address (one that answers bytes a controller never sends, or nothing): the
    worker tries again, then exits 2 with one line, no traceback."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    peers = []

    def serve() -> None:
        while True:
            try:
                peer_socket, _ = server.accept()
            except OSError:
                return
            peers.append(peer_socket)
            if peer == "answers garbage":
                peer_socket.sendall(b"\x00\x00\x00\x0cSSH-2.0-nope")  # a framed message, not a challenge

    threading.Thread(target=serve, daemon=True).start()
    start = time.monotonic()
    worker = subprocess.run([sys.executable, "-m", "ltx2_core.runtime", "--connect", f"127.0.0.1:{port}",
                             "--timeout", "5"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "LTX2_WORKERS_KEY": "test-secret"})
    server.close()
    assert worker.returncode == 2 and time.monotonic() - start < 60 and peers
    lines = worker.stderr.strip().splitlines()
    assert len(lines) == 1 and f"something else listens on 127.0.0.1:{port}" in lines[0], worker.stderr[-2000:]


def test_a_controller_whose_port_another_program_holds_says_so(address):
    host, port = address.rsplit(":", 1)
    with socket.create_server((host, int(port))):
        controller = Controller(ModelFiles(), ParallelConfig(), threads=1, attach=address)
        with pytest.raises(LinkError, match=f"cannot listen for workers on {address}: .*pick a free port"):
            controller.start()
    assert not controller.workers.active


def test_a_controller_that_no_worker_reaches_says_so(address):
    controller = Controller(ModelFiles(), ParallelConfig(sp=2), threads=1, attach=address, start_timeout=2)
    with pytest.raises(WorkerError, match=rf"no worker connected to {address} within 2 s \(ranks \[0, 1\] missing\)"):
        controller.start()
    assert not controller.workers.active


def test_a_worker_whose_controller_vanishes_inside_a_job_exits_non_zero_for_torchrun_to_restart(address, tmp_path):
    """It cannot know whether its peers finish the job: status 1, so torchrun's --max-restarts starts the launch
    again (an idle worker would wait for the next controller instead)."""
    caller = tmp_path / "caller.py"
    caller.write_text(
        "import sys\n"
        f"sys.path[:0] = [{str(ROOT)!r}]\n"
        "from ltx2_core import ModelFiles, Request\n"
        "from ltx2_core.demo import demo_models\n"
        "from ltx2_core.parallel import ParallelConfig\n"
        "from ltx2_core.runtime import Controller, generate_on_workers\n"
        f"controller = Controller(ModelFiles(), ParallelConfig(), threads=1, attach={address!r})\n"
        "request = Request('a red car in the rain', width=96, height=64, frames=9, steps=500)\n"
        "generate_on_workers(controller, request, demo_models('2.0')._replace(transformer=None),\n"
        "                    lambda stage, done, total: print('step', done, flush=True))\n")
    controller = subprocess.Popen([sys.executable, str(caller)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    worker = _worker(address)
    try:
        assert "step" in controller.stdout.readline()  # the job runs on the worker
        controller.kill()
        assert worker.wait(timeout=30) == 1
    finally:
        controller.kill()
        worker.kill()
        worker.communicate()
        controller.communicate()


def test_a_rank_that_dies_between_jobs_is_replaced_by_torchruns_restart_and_the_next_job_runs(address):
    """A torchrun launch of two ranks (`--max-restarts 1`); rank 1 is killed while idle. torchrun stops rank 0 and
    starts both again; the new ranks take the dead ones' places, and the next job, which waits for them, runs and
    gives the first job's result."""
    import signal

    import torch

    models = demo_models("2.0")._replace(transformer=None)
    controller = Controller(ModelFiles(), ParallelConfig(sp=2), threads=1, attach=address)
    launch = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                               "--max-restarts", "1", "--monitor-interval", "0.5", "-m", "ltx2_core.runtime",
                               "--connect", address], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        first = generate_on_workers(controller, REQUEST, models)
        pids = controller.pids
        os.kill(pids[1], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not controller.workers.dead() and time.monotonic() < deadline:  # its connection closes
            time.sleep(0.1)
        again = generate_on_workers(controller, REQUEST, models)
        assert not set(controller.pids) & set(pids) and len(controller.pids) == 2
        assert launch.poll() is None  # the launch still runs (one restart spent)
    finally:
        controller.shutdown()
        launch.terminate()
        output = launch.communicate(timeout=60)[0]
    assert "refused" not in output, output[-3000:]
    torch.testing.assert_close(again.frames, first.frames, atol=1e-5, rtol=0)


def test_workers_from_two_torchrun_launches_attach_equal_one_process_and_serve_the_next_controller(local, monkeypatch):
    """Two torchrun launches on localhost (as two machines would be: --nnodes 2, one process each) attach to a
    controller listening on a port; a stranger without the key is refused first. When the controller shuts down
    (ComfyUI unloading the model), the same processes wait for and serve the next controller on that address."""
    from multiprocessing import AuthenticationError
    from multiprocessing.connection import Client

    models, want = local
    monkeypatch.setenv("LTX2_WORKERS_KEY", "test-secret")
    address, master = f"127.0.0.1:{_free_port()}", str(_free_port())
    controllers = [Controller(ModelFiles(), ParallelConfig(cfg=2), threads=1, attach=address) for _ in range(2)]
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
               "--master-addr", "127.0.0.1", "--master-port", master]
    launches = [subprocess.Popen([*command, "--node-rank", str(node), "-m", "ltx2_core.runtime", "--connect",
                                  address], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                for node in (0, 1)]
    stranger_refused = False

    def stranger() -> None:  # connects while the controller waits for its workers (it listens from the first job)
        nonlocal stranger_refused
        time.sleep(1.0)
        try:
            Client(("127.0.0.1", int(address.rsplit(":", 1)[1])), authkey=b"wrong")
        except (AuthenticationError, EOFError, OSError):
            stranger_refused = True

    threading.Thread(target=stranger, daemon=True).start()
    try:
        got = run_on(controllers[0], models)
        pids = controllers[0].pids
        controllers[0].shutdown()
        again = run_on(controllers[1], models, replace(TWO_STEPS, seed=1))
        assert controllers[1].pids == pids and len(pids) == 2
        assert [launch.poll() for launch in launches] == [None, None]  # they wait for the next controller
    finally:
        for controller in controllers:
            controller.shutdown()
        outputs = []
        for launch in launches:
            launch.terminate()
            outputs.append(launch.communicate(timeout=60)[0])
    assert all("Traceback" not in output.split("SIGTERM")[0] for output in outputs), "\n".join(outputs)
    assert stranger_refused
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    torch.testing.assert_close(got.waveform, want.waveform, atol=1e-4, rtol=0)
    assert (again.frames - got.frames).abs().max() > 0.01


def test_a_launch_of_the_wrong_size_is_refused_with_the_fix(monkeypatch):
    monkeypatch.setenv("LTX2_WORKERS_KEY", "test-secret")
    address = f"127.0.0.1:{_free_port()}"
    controller = Controller(ModelFiles(), ParallelConfig(sp=2), threads=1, attach=address, start_timeout=120)
    lone = subprocess.Popen([sys.executable, "-m", "ltx2_core.runtime", "--connect", address],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        with pytest.raises(WorkerError, match=r"has 1 rank \(rank 0\) .* launch torchrun with 2 processes"):
            controller.start()
        assert lone.wait(timeout=60) == 2 and "refused" in lone.stderr.read()
    finally:
        controller.shutdown()
        lone.kill()
