"""Persistent workers behind a controller (spawned processes, gloo) sample what one process samples: reused across
jobs, with every kind of condition (images, a held sound, a held video, a retake, an IC-LoRA control, a long clip's
windows) and a LoRA file cut to tensor-parallel shards. The tests share one set of workers at a time (the `workers`
fixture): ordered by layout, they start workers four times. Faults and interrupts: test_worker_faults.py."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from ltx2_core import ModelFiles, generate, load_lora
from ltx2_core.demo import demo_models
from ltx2_core.parallel import ParallelConfig
from support.model_files import write_lora
from support.workers import REQUEST, run_on


@pytest.mark.parametrize("layout", [ParallelConfig(cfg=2, sp=2), ParallelConfig(sp=2)], ids=["cfg2xsp2", "sp2"])
def test_workers_equal_one_process_and_are_reused(local, workers, layout):
    """(Their shutdown leaves no process behind: checked when the `workers` fixture lets them go.)"""
    models, want = local
    controller = workers(layout)
    got = run_on(controller, models)
    pids = controller.pids
    assert len(pids) == layout.world_size
    again = run_on(controller, models, replace(REQUEST, seed=1))
    assert controller.pids == pids  # the second job ran on the same processes
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    torch.testing.assert_close(got.waveform, want.waveform, atol=1e-4, rtol=0)
    assert (again.frames - got.frames).abs().max() > 0.01  # another seed: another video


def test_images_reach_the_workers_with_each_stage(tmp_path, workers):
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
    got = run_on(workers(ParallelConfig(sp=2)), models, request)
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    free = generate(replace(request, images=()), models)
    assert (free.frames - want.frames).abs().max() > 0.01


def test_a_held_sound_reaches_the_workers_and_comes_back_as_the_clip(workers):
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
    got = run_on(workers(ParallelConfig(cfg=1, sp=2)), models, request)
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    first = round(0.5 * 44100)
    assert torch.equal(got.waveform, sound.samples[:, first:first + round(9 / 24 * 44100)])  # a copy of the clip
    free = generate(replace(request, audio=None), models)
    assert (free.frames - want.frames).abs().max() > 0.01


def test_a_long_clip_on_workers_equals_one_process(workers):
    """A long clip's windows through the controller (the node's path with a multi-GPU layout): each window's held
    video and audio latents travel with its stage, the same clip as one process."""
    from ltx2_core import Windows, generate_long
    from ltx2_core.runtime import WorkerSampler

    models = demo_models("2.0")
    request = replace(REQUEST, width=64, height=64, frames=41, windows=Windows(25, 8, ("a train", "a boat")))
    want = generate_long(request, models)
    got = generate_long(request, models._replace(transformer=None),
                        sampler=WorkerSampler(workers(ParallelConfig(sp=2))))
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    torch.testing.assert_close(got.waveform, want.waveform, atol=1e-4, rtol=0)


@pytest.mark.parametrize("layout", [ParallelConfig(sp=2), ParallelConfig(tp=2)], ids=["sp2", "tp2"])
def test_a_control_and_its_ic_lora_reach_the_workers_in_stage_one(tmp_path, workers, layout):
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
    got = run_on(workers(layout), models, request)
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    without_lora = generate(request, models._replace(ic_loras=()))
    assert (without_lora.frames - want.frames).abs().max() > 5e-4  # 5x the tolerance: without it the test fails


def test_two_stage_with_a_lora_file_on_tensor_parallel_workers_equals_one_process(tmp_path, workers):
    """The workers cut the distilled LoRA (read from its file) to their shards and fuse it for stage 2 only; the
    caller upsamples between the stages."""
    demo = demo_models("2.0")
    models = demo._replace(distilled_lora=load_lora(write_lora(tmp_path / "distilled.safetensors", seed=4)))
    request = replace(REQUEST, mode="two-stage", width=128, height=128)
    want, other_lora = generate(request, models), generate(request, demo)
    got = run_on(workers(ParallelConfig(tp=2)), models, request)
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    torch.testing.assert_close(got.waveform, want.waveform, atol=1e-4, rtol=0)
    assert (other_lora.frames - want.frames).abs().max() > 0.01  # the LoRA matters: the test can fail


def test_a_held_video_reaches_the_workers_frozen_and_its_sound_equals_one_process(tmp_path, workers):
    """Sound for a video through the controller (LTX-2.5: the frozen video's sigma fed as 0 on every rank): the
    video encoded here, its latent held on sequence-parallel workers, the same frames and sound as one process."""
    from unit.test_video_to_audio import write_video

    from ltx2_core.conditioning import VideoCondition

    clip = write_video(tmp_path / "silent.mp4", width=96, height=64, frames=9)
    models = demo_models("2.5")
    request = replace(REQUEST, video_input=VideoCondition(clip))
    want = generate(request, models)
    got = run_on(workers(ParallelConfig(sp=2), ModelFiles(version="2.5")), models, request)
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    torch.testing.assert_close(got.waveform, want.waveform, atol=1e-4, rtol=0)
    other = generate(replace(request, seed=7), models)
    assert (other.waveform - want.waveform).abs().max() > 1e-3


def test_a_retake_reaches_the_workers_and_equals_one_process(tmp_path, workers):
    """A retake through the controller (sequence-parallel workers, LTX-2.5): the file's video and sound encoded
    here, held outside the span by per-token masks split over the ranks; the same frames and sound as one process."""
    from unit.test_video_to_audio import write_video

    from ltx2_core.conditioning import Retake

    clip = write_video(tmp_path / "loud.mp4", width=96, height=64, frames=9, sound=True)
    models = demo_models("2.5")
    request = replace(REQUEST, retake=Retake(clip, 0.1, 0.3))
    want = generate(request, models)
    got = run_on(workers(ParallelConfig(sp=2), ModelFiles(version="2.5")), models, request)
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    torch.testing.assert_close(got.waveform, want.waveform, atol=1e-4, rtol=0)
    other = generate(replace(request, retake=Retake(clip, 0.0, 0.05)), models)
    assert (other.frames - want.frames).abs().max() > 0.01
