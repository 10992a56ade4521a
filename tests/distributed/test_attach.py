"""Workers that attach over TCP (`python -m ltx2_core.runtime --connect HOST:PORT`, here one process without
torchrun: a group of one): a silent connection to the port delays no worker, a worker outlives its controller and
serves the next one on the same address, and a controller that no worker reaches says so."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ltx2_core import ModelFiles, Request
from ltx2_core.demo import demo_models
from ltx2_core.parallel import ParallelConfig
from ltx2_core.runtime import Controller, WorkerError, generate_on_workers

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
