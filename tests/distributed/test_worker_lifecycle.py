"""The life of spawned workers around their jobs: silence between jobs is no hang, starts and shutdowns leave
nothing behind, an input the caller can check is refused there (the workers stay), and an error several ranks
report is said once with its ranks."""

from __future__ import annotations

import gc
import multiprocessing.synchronize
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from ltx2_core import generate, load_lora
from ltx2_core.demo import demo_models
from ltx2_core.parallel import ParallelConfig
from ltx2_core.runtime import Controller, WorkerError, WorkerSampler, generate_on_workers
from support.model_files import write_lora
from support.workers import FILES, REQUEST

CYCLES = 4  # every start leaked files, threads, semaphores and a folder (ComfyUI restarts workers per layout)


@pytest.fixture(scope="module")
def models():
    return demo_models("2.0")._replace(transformer=None)  # here: the prompt encoder and the decoders


def test_a_job_after_an_idle_pause_longer_than_the_timeout_succeeds(models, workers):
    """The loader starts the workers, then Gemma loads and encodes for longer than `timeout`: no "it hangs"."""
    controller = workers(ParallelConfig(cfg=2))
    timeout, controller.timeout = controller.timeout, 3
    try:
        controller.start()
        pids = controller.pids
        time.sleep(4)  # idle, after the start
        first = generate_on_workers(controller, REQUEST, models)
        time.sleep(4)  # idle, between jobs
        second = generate_on_workers(controller, REQUEST, models)
        assert controller.pids == pids  # nothing was restarted
    finally:
        controller.timeout = timeout
    torch.testing.assert_close(first.frames, second.frames, atol=1e-4, rtol=0)


def _semaphores() -> dict[str, object]:
    """The named semaphores this process holds (multiprocessing's queues), by their file in /dev/shm."""
    return {"/dev/shm/sem." + lock._semlock.name.lstrip("/"): lock for lock in gc.get_objects()
            if issubclass(type(lock), multiprocessing.synchronize.SemLock) and lock._semlock.name}


def _resources() -> tuple[int, int, int]:
    gc.collect()
    return len(os.listdir("/proc/self/fd")), threading.active_count(), len(_semaphores())


def test_starts_and_shutdowns_leave_no_file_thread_semaphore_or_folder_behind():
    """ComfyUI starts workers again for every new layout or checkpoint: nothing may pile up in the server. The
    first cycle starts what lives once per process (multiprocessing's resource tracker, its shared-memory heap)."""
    controller = Controller(FILES, ParallelConfig(), threads=1)
    controller.start()
    controller.shutdown()
    del controller
    before, folders, semaphores, held = _resources(), [], set(), set(_semaphores())
    for _ in range(CYCLES):
        controller = Controller(FILES, ParallelConfig(), threads=1)
        controller.start()
        folders.append(controller.workers.folder)
        semaphores |= set(_semaphores())
        controller.shutdown()
    del controller
    assert _resources() == before  # (open files, threads, semaphores held)
    assert not semaphores - held  # none is named at all: a caller killed by SIGTERM leaves none behind
    assert len(set(folders)) == CYCLES and not [folder for folder in folders if os.path.exists(folder)]


def test_a_controller_dropped_without_shutdown_stops_its_workers():
    controller = Controller(FILES, ParallelConfig(), threads=1)
    controller.start()
    pids, folder = controller.pids, controller.workers.folder
    del controller
    gc.collect()
    assert not Path(f"/proc/{pids[0]}").exists() and not os.path.exists(folder)


def test_a_missing_lora_is_refused_here_and_an_error_of_every_rank_is_said_once(tmp_path, models, workers):
    """A LoRA file gone since it was loaded: the caller says so and the workers stay. A file the workers cannot
    read: each rank fails alike, said once with both ranks (then the workers restart with the next job)."""
    gone = load_lora(write_lora(tmp_path / "gone.safetensors", seed=1))
    broken = load_lora(write_lora(tmp_path / "broken.safetensors", seed=2))
    os.remove(gone.path)
    Path(broken.path).write_bytes(b"not a safetensors file")
    controller = workers(ParallelConfig(cfg=2))
    controller.start()
    pids = controller.pids
    with pytest.raises(FileNotFoundError, match="gone.safetensors is gone"):
        _with_lora(controller, models, gone)
    assert controller.pids == pids
    with pytest.raises(WorkerError, match=r"worker ranks 0 and 1 failed: ") as failed:
        _with_lora(controller, models, broken)
    assert str(failed.value).count("failed:") == 1
    generate_on_workers(controller, replace(REQUEST, steps=1), models)  # started again


def _with_lora(controller: Controller, models, lora) -> None:
    generate(REQUEST, models, sampler=WorkerSampler(controller, loras=[(lora, 1.0)]))
