"""Persistent workers behind a controller (spawned processes, gloo): the same result as one process, reused across
jobs; a killed worker or an interrupt ends the job with a clear exception and the next job succeeds; shutdown leaves
no process behind."""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from ltx2_core import ModelFiles, Request, generate, load_lora
from ltx2_core.demo import demo_models, demo_transformer
from ltx2_core.parallel import ParallelConfig
from ltx2_core.runtime import Controller, JobInterrupted, WorkerError, generate_on_workers
from support.model_files import write_lora

REQUEST = Request("a red car in the rain", width=96, height=64, frames=9, steps=2)
FILES = ModelFiles()


@pytest.fixture(scope="module")
def local():
    models = demo_models("2.0")
    return models, generate(REQUEST, models)


def _run(controller: Controller, models, request: Request = REQUEST, progress=None, should_stop=None):
    """The request on the workers; here only the prompt encoder, upsampler and decoders (no transformer)."""
    return generate_on_workers(controller, request, models._replace(transformer=None), progress, should_stop)


def _on_fresh_workers(layout: ParallelConfig, models, request: Request):
    """`request` on a controller started for it and shut down after."""
    controller = Controller(FILES, layout, threads=1)
    try:
        return _run(controller, models, request)
    finally:
        controller.shutdown()


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def _dead(pid: int) -> bool:
    """Gone, or a zombie (dead until its parent reaps it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("layout", [ParallelConfig(sp=2), ParallelConfig(cfg=2, sp=2)], ids=["sp2", "cfg2xsp2"])
def test_workers_equal_one_process_and_are_reused(local, layout):
    models, want = local
    controller = Controller(FILES, layout, threads=1)
    try:
        got = _run(controller, models)
        pids = controller.pids
        assert len(pids) == layout.world_size
        again = _run(controller, models, replace(REQUEST, seed=1))
        assert controller.pids == pids  # the second job ran on the same processes
    finally:
        controller.shutdown()
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    torch.testing.assert_close(got.waveform, want.waveform, atol=1e-4, rtol=0)
    assert (again.frames - got.frames).abs().max() > 0.01  # another seed: another video
    assert all(_gone(pid) for pid in pids)


def test_a_killed_worker_fails_the_job_quickly_and_the_next_job_restarts_them(local):
    """Killed inside a job: the job fails within the timeout, the next one starts them again. Killed between jobs:
    the next job starts them again and runs."""
    models, want = local
    controller = Controller(FILES, ParallelConfig(sp=2), threads=1, timeout=30)
    long = replace(REQUEST, steps=200)
    try:
        controller.start()
        first = controller.pids

        def kill_rank_one(stage, done, total):
            if done == 2:
                os.kill(first[1], signal.SIGKILL)

        start = time.monotonic()
        with pytest.raises(WorkerError, match="rank 1 .* exited"):
            _run(controller, models, long, kill_rank_one)
        assert time.monotonic() - start < 30 and all(_gone(pid) for pid in first)
        got = _run(controller, models)
        second = controller.pids
        assert second != first
        torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
        os.kill(second[0], signal.SIGKILL)  # idle
        while not _dead(second[0]):
            time.sleep(0.1)
        again = _run(controller, models)
        assert not set(controller.pids) & set(second) and all(_gone(pid) for pid in second)
        torch.testing.assert_close(again.frames, want.frames, atol=1e-4, rtol=0)
    finally:
        controller.shutdown()


def test_an_interrupt_stops_every_rank_and_the_next_job_succeeds(local):
    models, want = local
    controller = Controller(FILES, ParallelConfig(cfg=2), threads=1)
    long = replace(REQUEST, steps=200)
    try:
        seen = []

        def interrupt_at_three(stage, done, total):
            seen.append(done)
            if done == 3:
                controller.interrupt()

        with pytest.raises(JobInterrupted):
            _run(controller, models, long, interrupt_at_three)
        assert max(seen) < 10  # stopped within the margin, not at the end
        pids = controller.pids
        got = _run(controller, models)
        assert controller.pids == pids  # the workers survived the interrupt
        torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    finally:
        controller.shutdown()
    assert all(_gone(pid) for pid in pids)


def test_a_cancel_on_slow_workers_lands_within_a_block_or_two_on_every_rank_and_the_next_job_runs():
    """Blocks of 0.4 s (8 a step): the flag set in the second step stops every rank at the same block, well before
    the step ends; the same processes then run the next job, which equals one process."""
    from support.slow_model import SlowFiles

    files = SlowFiles(block_seconds=0.4)
    models = demo_models("2.0")._replace(transformer=demo_transformer(files.transformer_config()))
    cancel, steps, pressed = threading.Event(), [], []

    def press_cancel() -> None:
        pressed.append(time.monotonic())
        cancel.set()

    def progress(stage, done, total):
        steps.append(time.monotonic())
        threading.Timer(2.5 * files.block_seconds, press_cancel).start()  # in the next step's third block

    controller = Controller(files, ParallelConfig(sp=2), threads=1)
    try:
        controller.start()
        pids, started = controller.pids, time.monotonic()
        with pytest.raises(JobInterrupted):
            _run(controller, models, replace(REQUEST, steps=4), progress, cancel.is_set)
        stopped = time.monotonic()
        assert len(steps) == 1 and len(pressed) == 1  # the second step never ended
        assert stopped - pressed[0] < (steps[0] - started) / 2  # a block or two of 8, not the step's end
        got = _run(controller, models, replace(REQUEST, steps=1))
        assert controller.pids == pids
    finally:
        controller.shutdown()
    want = generate(replace(REQUEST, steps=1), models)
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)


def test_two_stage_with_a_lora_file_on_tensor_parallel_workers_equals_one_process(tmp_path):
    """The workers cut the distilled LoRA (read from its file) to their shards and fuse it for stage 2 only; the
    caller upsamples between the stages."""
    demo = demo_models("2.0")
    models = demo._replace(distilled_lora=load_lora(write_lora(tmp_path / "distilled.safetensors", seed=4)))
    request = replace(REQUEST, mode="two-stage", width=128, height=128)
    want, other_lora = generate(request, models), generate(request, demo)
    got = _on_fresh_workers(ParallelConfig(tp=2), models, request)
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    torch.testing.assert_close(got.waveform, want.waveform, atol=1e-4, rtol=0)
    assert (other_lora.frames - want.frames).abs().max() > 0.01  # the LoRA matters: the test can fail


def test_a_raising_progress_callback_or_should_stop_stops_the_job_and_the_workers_stay(local):
    """ComfyUI's interrupt is an exception raised from its progress hook: it reaches the caller once every rank
    has stopped; a polled `should_stop` ends as JobInterrupted."""
    models, want = local
    controller = Controller(FILES, ParallelConfig(sp=2), threads=1)
    long = replace(REQUEST, steps=200)

    class Cancelled(Exception):
        pass

    def cancel_at_two(stage, done, total):
        if done == 2:
            raise Cancelled

    try:
        with pytest.raises(Cancelled):
            _run(controller, models, long, cancel_at_two)
        pids = controller.pids
        steps = []
        with pytest.raises(JobInterrupted):
            _run(controller, models, long, lambda stage, done, total: steps.append(done),
                 should_stop=lambda: len(steps) >= 2)
        assert max(steps) < 10 and controller.pids == pids
        got = _run(controller, models)
        torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    finally:
        controller.shutdown()


def test_the_callers_main_script_is_not_run_again_in_the_workers(tmp_path):
    """ComfyUI's main.py does its work at import, with no `if __name__ == "__main__"`: spawn must not re-run it."""
    import subprocess
    import sys

    marker, script = tmp_path / "runs", tmp_path / "main.py"
    script.write_text(
        "import sys\n"
        f"sys.path[:0] = {[str(Path(__file__).resolve().parents[2])]!r}\n"
        f"open({str(marker)!r}, 'a').write('run\\n')\n"
        "from ltx2_core import ModelFiles\n"
        "from ltx2_core.parallel import ParallelConfig\n"
        "from ltx2_core.runtime import Controller\n"
        "controller = Controller(ModelFiles(), ParallelConfig(sp=2), threads=1)\n"
        "controller.start()\n"
        "controller.shutdown()\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert marker.read_text().splitlines() == ["run"]


@pytest.mark.parametrize("how", ["exits", "is killed", "gets SIGTERM in a job"])
def test_the_callers_exit_leaves_no_worker_folder_or_semaphore_behind(tmp_path, how):
    """A caller that exits without shutting down, is killed (no exit handler runs), or gets SIGTERM while its workers
    sample (ComfyUI stopped by its service manager): the workers go with it, and so do their rendezvous folder and
    anything named in /dev/shm (multiprocessing's resource tracker says "leaked semaphore objects" otherwise)."""
    import subprocess
    import sys

    script = tmp_path / "caller.py"
    script.write_text(
        "import os, signal, sys\n"
        f"sys.path[:0] = {[str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[1])]!r}\n"
        "from ltx2_core import ModelFiles, Request\n"
        "from ltx2_core.demo import demo_models\n"
        "from ltx2_core.parallel import ParallelConfig\n"
        "from ltx2_core.runtime import Controller, generate_on_workers\n"
        "if __name__ == '__main__':\n"
        "    controller = Controller(ModelFiles(), ParallelConfig(sp=2), threads=1)\n"
        "    controller.start()\n"
        "    print(*controller.pids, controller.workers.folder, flush=True)\n"
        + ("    os.kill(os.getpid(), signal.SIGKILL)\n" if how == "is killed" else "")
        + ("    generate_on_workers(controller, Request('a car', width=96, height=64, frames=9, steps=500),\n"
           "                        demo_models()._replace(transformer=None), lambda *step: print('step', flush=True))\n"
           if how == "gets SIGTERM in a job" else ""))
    caller = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    *pids, folder = caller.stdout.readline().split()
    if how == "gets SIGTERM in a job":
        assert caller.stdout.readline() == "step\n"  # sampling
        caller.send_signal(signal.SIGTERM)
    _, stderr = caller.communicate(timeout=300)  # also waits for the workers and the resource tracker to end
    assert caller.returncode == {"exits": 0, "is killed": -9}.get(how, -15), stderr[-2000:]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not all(_dead(int(pid)) for pid in pids):
        time.sleep(0.2)
    assert len(pids) == 2 and all(_dead(int(pid)) for pid in pids)
    assert os.path.isdir(os.path.dirname(folder)) and not os.path.exists(folder)
    assert "leaked" not in stderr, stderr[-2000:]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_workers_from_two_torchrun_launches_attach_equal_one_process_and_serve_the_next_controller(local, monkeypatch):
    """Two torchrun launches on localhost (as two machines would be: --nnodes 2, one process each) attach to a
    controller listening on a port; a stranger without the key is refused first. When the controller shuts down
    (ComfyUI unloading the model), the same processes wait for and serve the next controller on that address."""
    import subprocess
    import sys
    import threading
    from multiprocessing import AuthenticationError
    from multiprocessing.connection import Client

    models, want = local
    monkeypatch.setenv("LTX2_WORKERS_KEY", "test-secret")
    address, master = f"127.0.0.1:{_free_port()}", str(_free_port())
    controllers = [Controller(FILES, ParallelConfig(cfg=2), threads=1, attach=address) for _ in range(2)]
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
               "--master-addr", "127.0.0.1", "--master-port", master]
    root = Path(__file__).resolve().parents[2]
    launches = [subprocess.Popen([*command, "--node-rank", str(node), "-m", "ltx2_core.runtime", "--connect",
                                  address], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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
        got = _run(controllers[0], models)
        pids = controllers[0].pids
        controllers[0].shutdown()
        again = _run(controllers[1], models, replace(REQUEST, seed=1))
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
    import subprocess
    import sys

    monkeypatch.setenv("LTX2_WORKERS_KEY", "test-secret")
    address = f"127.0.0.1:{_free_port()}"
    controller = Controller(FILES, ParallelConfig(sp=2), threads=1, attach=address, start_timeout=120)
    lone = subprocess.Popen([sys.executable, "-m", "ltx2_core.runtime", "--connect", address],
                            cwd=Path(__file__).resolve().parents[2], stderr=subprocess.PIPE, text=True)
    try:
        with pytest.raises(WorkerError, match=r"has 1 rank \(rank 0\) .* launch torchrun with 2 processes"):
            controller.start()
        assert lone.wait(timeout=60) == 2 and "refused" in lone.stderr.read()
    finally:
        controller.shutdown()
        lone.kill()


def test_a_hung_worker_fails_the_job_within_the_timeout(local):
    models, want = local
    controller = Controller(FILES, ParallelConfig(sp=2), threads=1, timeout=5)
    try:
        controller.start()
        first = controller.pids
        os.kill(first[1], signal.SIGSTOP)  # alive but silent: no heartbeat, no step
        start = time.monotonic()
        with pytest.raises(WorkerError, match="rank 1 sent nothing for 5 s: it hangs"):
            _run(controller, models)
        assert time.monotonic() - start < 15 and all(_gone(pid) for pid in first)
        got = _run(controller, models)
        torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    finally:
        controller.shutdown()


def test_images_reach_the_workers_with_each_stage(tmp_path):
    """Image conditioning through the controller: encoded here at each stage's size, held on every rank."""
    import numpy as np
    from PIL import Image

    from ltx2_core.conditioning.images import ImageCondition

    pixels = (np.arange(60 * 80 * 3) % 253).astype(np.uint8).reshape(60, 80, 3)
    Image.fromarray(pixels).save(tmp_path / "first.png")
    models = demo_models("2.0")
    request = replace(REQUEST, mode="distilled", width=128, height=128, steps=None,
                      images=(ImageCondition(str(tmp_path / "first.png")), ImageCondition(str(tmp_path / "first.png"),
                                                                                          frame=8, strength=0.5)))
    want = generate(request, models)
    got = _on_fresh_workers(ParallelConfig(sp=2), models, request)
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    free = generate(replace(request, images=()), models)
    assert (free.frames - want.frames).abs().max() > 0.01


def test_a_held_sound_reaches_the_workers_and_comes_back_as_the_clip():
    """Audio-to-video through the controller: the sound encoded here, held on every rank in both stages, and the
    result written with the clip's own samples (the sound never travels to the workers; only its latent does)."""
    from ltx2_core.audio_io import Waveform
    from ltx2_core.conditioning import AudioCondition

    models = demo_models("2.0")
    t = torch.arange(44100 * 2) / 44100
    sound = Waveform(torch.stack([0.4 * torch.sin(2 * torch.pi * 180 * t), 0.3 * torch.sin(2 * torch.pi * 240 * t)]),
                     44100)
    request = replace(REQUEST, mode="distilled", width=128, height=128, steps=None,
                      audio=AudioCondition(sound, start=0.5))
    want = generate(request, models)
    got = _on_fresh_workers(ParallelConfig(cfg=1, sp=2), models, request)
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    first = round(0.5 * 44100)
    assert torch.equal(got.waveform, sound.samples[:, first:first + round(9 / 24 * 44100)])  # a copy of the clip
    free = generate(replace(request, audio=None), models)
    assert (free.frames - want.frames).abs().max() > 0.01


def test_a_held_video_reaches_the_workers_frozen_and_its_sound_equals_one_process(tmp_path):
    """Sound for a video through the controller (LTX-2.5: the frozen video's sigma fed as 0 on every rank): the
    video encoded here, its latent held on sequence-parallel workers, the same frames and sound as one process."""
    from unit.test_video_to_audio import write_video

    from ltx2_core.conditioning import VideoCondition

    clip = write_video(tmp_path / "silent.mp4", width=96, height=64, frames=9)
    models = demo_models("2.5")
    request = replace(REQUEST, video_input=VideoCondition(clip))
    want = generate(request, models)
    controller = Controller(ModelFiles(version="2.5"), ParallelConfig(sp=2), threads=1)
    try:
        got = _run(controller, models, request)
    finally:
        controller.shutdown()
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    torch.testing.assert_close(got.waveform, want.waveform, atol=1e-4, rtol=0)
    other = generate(replace(request, seed=7), models)
    assert (other.waveform - want.waveform).abs().max() > 1e-3


def test_a_retake_reaches_the_workers_and_equals_one_process(tmp_path):
    """A retake through the controller (sequence-parallel workers, LTX-2.5): the file's video and sound encoded
    here, held outside the span by per-token masks split over the ranks; the same frames and sound as one process."""
    from unit.test_video_to_audio import write_video

    from ltx2_core.conditioning import Retake

    clip = write_video(tmp_path / "loud.mp4", width=96, height=64, frames=9, sound=True)
    models = demo_models("2.5")
    request = replace(REQUEST, retake=Retake(clip, 0.1, 0.3))
    want = generate(request, models)
    controller = Controller(ModelFiles(version="2.5"), ParallelConfig(sp=2), threads=1)
    try:
        got = _run(controller, models, request)
    finally:
        controller.shutdown()
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    torch.testing.assert_close(got.waveform, want.waveform, atol=1e-4, rtol=0)
    other = generate(replace(request, retake=Retake(clip, 0.0, 0.05)), models)
    assert (other.frames - want.frames).abs().max() > 0.01


@pytest.mark.parametrize("layout", [ParallelConfig(sp=2), ParallelConfig(tp=2)], ids=["sp2", "tp2"])
def test_a_control_and_its_ic_lora_reach_the_workers_in_stage_one(tmp_path, layout):
    """IC-LoRA control through the controller: the control encoded here at stage 1's half size / the factor, its
    tokens appended on every rank (sequence parallel splits them with the video's); the IC-LoRA, sent as its file,
    fused around stage 1 only (cut to the shards under tensor parallelism); both dropped before stage 2."""
    from ltx2_core.conditioning import ControlCondition
    from support.control_video import write_video

    control = ControlCondition(str(write_video(tmp_path / "depth.mp4", width=128, height=128, frames=9)),
                               strength=0.9, downscale=2)
    ic_lora = load_lora(write_lora(tmp_path / "depth.safetensors", seed=5, metadata={"reference_downscale_factor": "2"}))
    models = demo_models("2.0")._replace(ic_loras=((ic_lora, 6.0),))  # strong: the tiny LoRA barely acts
    request = replace(REQUEST, mode="distilled", width=256, height=128, steps=None, controls=(control,))
    want = generate(request, models)
    got = _on_fresh_workers(layout, models, request)
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    without_lora = generate(request, models._replace(ic_loras=()))
    assert (without_lora.frames - want.frames).abs().max() > 5e-4  # 5x the tolerance: without it the test fails


def test_a_long_clip_on_workers_equals_one_process():
    """A long clip's windows through the controller (the node's path with a multi-GPU layout): each window's held
    video and audio latents travel with its stage, the same clip as one process."""
    from ltx2_core import Windows, generate_long
    from ltx2_core.runtime import WorkerSampler

    models = demo_models("2.0")
    request = replace(REQUEST, width=64, height=64, frames=41, windows=Windows(25, 8, ("a train", "a boat")))
    want = generate_long(request, models)
    controller = Controller(FILES, ParallelConfig(sp=2), threads=1)
    try:
        got = generate_long(request, models._replace(transformer=None), sampler=WorkerSampler(controller))
    finally:
        controller.shutdown()
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    torch.testing.assert_close(got.waveform, want.waveform, atol=1e-4, rtol=0)
