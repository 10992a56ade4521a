"""Persistent workers when something goes wrong: a worker killed inside a job or between jobs, or hung, fails the job
with a clear exception (or, between jobs, is started again) and the next job succeeds; a cancel stops every rank at
the same point, within a block or two, and the workers stay; a caller that exits, is killed or gets SIGTERM leaves
no worker, folder or semaphore behind, and spawn never runs its main script again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from ltx2_core import generate
from ltx2_core.demo import demo_models, demo_transformer
from ltx2_core.parallel import ParallelConfig
from ltx2_core.runtime import JobInterrupted, WorkerError
from support.slow_model import SlowFiles
from support.workers import REQUEST, dead, gone, run_on

ROOT = Path(__file__).resolve().parents[2]
LONG = replace(REQUEST, steps=200)


def test_a_raising_progress_callback_or_should_stop_stops_the_job_and_the_workers_stay(local, workers):
    """ComfyUI's interrupt is an exception raised from its progress hook: it reaches the caller once every rank
    has stopped; a polled `should_stop` ends as JobInterrupted."""
    models, want = local
    controller = workers(ParallelConfig(sp=2))

    class Cancelled(Exception):
        pass

    def cancel_at_two(stage, done, total):
        if done == 2:
            raise Cancelled

    with pytest.raises(Cancelled):
        run_on(controller, models, LONG, cancel_at_two)
    pids = controller.pids
    steps = []
    with pytest.raises(JobInterrupted):
        run_on(controller, models, LONG, lambda stage, done, total: steps.append(done),
               should_stop=lambda: len(steps) >= 2)
    assert max(steps) < 10 and controller.pids == pids
    got = run_on(controller, models)
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)


def test_a_killed_worker_fails_the_job_quickly_and_the_next_job_restarts_them(local, workers):
    """Killed inside a job: the job fails within the timeout, the next one starts them again. Killed between jobs:
    the next job starts them again and runs."""
    models, want = local
    controller = workers(ParallelConfig(sp=2))
    controller.start()
    first = controller.pids

    def kill_rank_one(stage, done, total):
        if done == 2:
            os.kill(first[1], signal.SIGKILL)

    start = time.monotonic()
    with pytest.raises(WorkerError, match="rank 1 .* exited"):
        run_on(controller, models, LONG, kill_rank_one)
    assert time.monotonic() - start < controller.timeout and all(gone(pid) for pid in first)
    got = run_on(controller, models)
    second = controller.pids
    assert second != first
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    os.kill(second[0], signal.SIGKILL)  # idle
    while not controller.workers.dead():  # until it can be reaped (its threads end after its main one)
        time.sleep(0.1)
    again = run_on(controller, models)
    assert not set(controller.pids) & set(second) and all(gone(pid) for pid in second)
    torch.testing.assert_close(again.frames, want.frames, atol=1e-4, rtol=0)


def test_a_hung_worker_fails_the_job_within_the_timeout(local, workers):
    models, want = local
    controller = workers(ParallelConfig(sp=2))
    controller.start()
    first = controller.pids
    os.kill(first[1], signal.SIGSTOP)  # alive but silent: no heartbeat, no step
    start, timeout, controller.timeout = time.monotonic(), controller.timeout, 5
    try:
        with pytest.raises(WorkerError, match="rank 1 sent nothing for 5 s: it hangs"):
            run_on(controller, models)
        assert time.monotonic() - start < 15 and all(gone(pid) for pid in first)
    finally:
        controller.timeout = timeout
    got = run_on(controller, models)
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)


def test_a_cancel_on_slow_workers_lands_within_a_block_or_two_on_every_rank_and_the_next_job_runs(workers):
    """Blocks of 0.4 s (8 a step): the flag set in the second step stops every rank at the same block, well before
    the step ends; the same processes then run the next job, which equals one process."""
    files = SlowFiles(block_seconds=0.4)
    models = demo_models("2.0")._replace(transformer=demo_transformer(files.transformer_config()))
    cancel, steps, pressed = threading.Event(), [], []

    def press_cancel() -> None:
        pressed.append(time.monotonic())
        cancel.set()

    def progress(stage, done, total):
        steps.append(time.monotonic())
        threading.Timer(2.5 * files.block_seconds, press_cancel).start()  # in the next step's third block

    controller = workers(ParallelConfig(sp=2), files)
    controller.start()
    pids, started = controller.pids, time.monotonic()
    with pytest.raises(JobInterrupted):
        run_on(controller, models, replace(REQUEST, steps=4), progress, cancel.is_set)
    stopped = time.monotonic()
    assert len(steps) == 1 and len(pressed) == 1  # the second step never ended
    assert stopped - pressed[0] < (steps[0] - started) / 2  # a block or two of 8, not the step's end
    got = run_on(controller, models, replace(REQUEST, steps=1))
    assert controller.pids == pids
    want = generate(replace(REQUEST, steps=1), models)
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)


def test_an_interrupt_stops_every_rank_and_the_next_job_succeeds(local, workers):
    models, want = local
    controller = workers(ParallelConfig(cfg=2))
    seen = []

    def interrupt_at_three(stage, done, total):
        seen.append(done)
        if done == 3:
            controller.interrupt()

    with pytest.raises(JobInterrupted):
        run_on(controller, models, LONG, interrupt_at_three)
    assert max(seen) < 10  # stopped within the margin, not at the end
    pids = controller.pids
    got = run_on(controller, models)
    assert controller.pids == pids  # the workers survived the interrupt
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)


@pytest.mark.parametrize("how", ["exits", "is killed", "gets SIGTERM in a job"])
def test_the_callers_exit_leaves_no_worker_folder_or_semaphore_behind(tmp_path, how):
    """A caller that exits without shutting down, is killed (no exit handler runs), or gets SIGTERM while its workers
    sample (ComfyUI stopped by its service manager): the workers go with it, and so do their rendezvous folder and
    anything named in /dev/shm (multiprocessing's resource tracker says "leaked semaphore objects" otherwise). Its
    script does its work at import, with no `if __name__ == "__main__"`, as ComfyUI's main.py: spawn must not run it
    again in the workers."""
    marker, script = tmp_path / "runs", tmp_path / "caller.py"
    script.write_text(
        "import os, signal, sys\n"
        f"sys.path[:0] = {[str(ROOT), str(ROOT / 'tests')]!r}\n"
        f"open({str(marker)!r}, 'a').write('run\\n')\n"
        "from ltx2_core import ModelFiles, Request\n"
        "from ltx2_core.demo import demo_models\n"
        "from ltx2_core.parallel import ParallelConfig\n"
        "from ltx2_core.runtime import Controller, generate_on_workers\n"
        "controller = Controller(ModelFiles(), ParallelConfig(sp=2), threads=1)\n"
        "controller.start()\n"
        "print(*controller.pids, controller.workers.folder, flush=True)\n"
        + ("os.kill(os.getpid(), signal.SIGKILL)\n" if how == "is killed" else "")
        + ("generate_on_workers(controller, Request('a car', width=96, height=64, frames=9, steps=500),\n"
           "                    demo_models()._replace(transformer=None), lambda *step: print('step', flush=True))\n"
           if how == "gets SIGTERM in a job" else ""))
    caller = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    *pids, folder = caller.stdout.readline().split()
    if how == "gets SIGTERM in a job":
        assert caller.stdout.readline() == "step\n"  # sampling
        caller.send_signal(signal.SIGTERM)
    _, stderr = caller.communicate(timeout=300)  # also waits for the workers and the resource tracker to end
    assert caller.returncode == {"exits": 0, "is killed": -9}.get(how, -15), stderr[-2000:]
    assert marker.read_text().splitlines() == ["run"]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not all(dead(int(pid)) for pid in pids):
        time.sleep(0.2)
    assert len(pids) == 2 and all(dead(int(pid)) for pid in pids)
    assert os.path.isdir(os.path.dirname(folder)) and not os.path.exists(folder)
    assert "leaked" not in stderr, stderr[-2000:]
