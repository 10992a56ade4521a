"""The loader with a layout: the transformer on two CPU worker processes (gloo), the VAEs here. Every node that
samples gives what it gives on the in-process model, LoRAs included; releasing the handle stops the workers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ltx2_core.parallel import ParallelConfig
from ltx2_core.stages import AVLatent
from nodes.handles import Parallel
from support.node_calls import node

GUIDED = dict(cfg=3.0, stg=1.0, rescale=0.7, modality=3.0, stg_blocks="auto", audio_cfg=7.0, audio_stg=1.0,
              audio_rescale=0.7, audio_modality=3.0, audio_stg_blocks="1")


@pytest.fixture(scope="module")
def on_workers(files):
    (layout,) = node("LTX2ParallelConfig", '{"cfg": 2, "sp": 1, "tp": 1}', 4)
    (model,) = node("LTX2CheckpointLoader", files["checkpoint"], "auto", "cpu", parallel=layout,
                    unique_id="workers-test")
    yield model
    model.release()


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def test_the_sampler_on_workers_equals_the_sampler_here_with_a_lora(loaded, on_workers, files):
    here, encoder, conditioning, _ = loaded
    assert on_workers.host.transformer is None and len(on_workers.host.workers.pids) == 2
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    results = []
    for model in (here, on_workers):
        (guidance,) = node("LTX2Guidance", model, **GUIDED)
        (styled,) = node("LTX2LoraLoader", model, files["style"], 0.8)
        results.append(node("LTX2Sampler", styled, conditioning, latent, 3, 2, "ltx2", guidance=guidance)[0])
    torch.testing.assert_close(results[1].video, results[0].video, atol=1e-4, rtol=0)
    torch.testing.assert_close(results[1].audio, results[0].audio, atol=1e-4, rtol=0)


@pytest.fixture(scope="module")
def text_on_workers(on_workers, files):
    """The text encoder loader given the model on workers: Gemma on the workers (runtime.text_task)."""
    (encoder,) = node("LTX2TextEncoderLoader", files["gemma"], on_workers, "cpu", False, unique_id="text-test")
    yield encoder
    encoder.release()


def test_the_text_encoder_on_workers_encodes_as_the_one_here(loaded, on_workers, text_on_workers, files):
    here, _, conditioning, _ = loaded
    assert text_on_workers.layout.mode == "prompts"  # both prompts at once: one on each worker
    assert text_on_workers.dtype == next(here.host.transformer.parameters()).dtype
    got = node("LTX2TextEncode", text_on_workers, "a red car in the rain", "blurry")[0]
    for g, w in zip((*got.positive, *got.negative), (*conditioning.positive, *conditioning.negative)):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=0)  # batch 1 against the batch of two here
    (again,) = node("LTX2TextEncoderLoader", files["gemma"], on_workers, "cpu", False, unique_id="again-test")
    (other,) = node("LTX2TextEncoderLoader", files["gemma"], on_workers, "cpu", False, unique_id="again-test")
    with pytest.raises(RuntimeError, match="was released"):  # the node's new load released its previous encoder
        again.encode("a cat")
    other.release()


def test_a_text_encoder_that_fits_no_layout_of_the_workers_loads_here(on_workers, files, monkeypatch, capsys):
    from ltx2_core import PromptEncoder
    from ltx2_core.runtime.text_task import LoadEncoder
    from nodes import loaders

    monkeypatch.setattr(loaders, "LoadEncoder", lambda *args, **kw: LoadEncoder(*args, **kw, budget=1))  # a byte each
    (encoder,) = node("LTX2TextEncoderLoader", files["gemma"], on_workers, "cpu", False)
    assert isinstance(encoder, PromptEncoder) and "loaded here instead" in capsys.readouterr().out


def test_the_sampler_on_workers_holds_a_sound_as_here(loaded, on_workers):
    """Audio-to-video on CFG-parallel workers: the uncond pass (the other rank) keeps the positive audio context, as
    here; the latent carries the sound back."""
    here, _, conditioning, _ = loaded
    t = torch.arange(16000) / 16000
    sound = {"waveform": (0.3 * torch.sin(2 * torch.pi * 220 * t))[None, None], "sample_rate": 16000}
    (audio, frames) = node("LTX2AudioCondition", sound, 0.1, 0.0, 1.0, 24.0)
    (latent,) = node("LTX2EmptyLatent", 96, 64, frames, 24.0)
    results = []
    for model in (here, on_workers):
        (guidance,) = node("LTX2Guidance", model, **GUIDED)
        results.append(node("LTX2Sampler", model, conditioning, latent, 3, 2, "ltx2", guidance=guidance,
                            audio=audio)[0])
    torch.testing.assert_close(results[1].video, results[0].video, atol=1e-4, rtol=0)
    assert torch.equal(results[1].audio, results[0].audio)  # the encoded sound, held
    assert torch.equal(results[1].sound.samples, results[0].sound.samples)


def test_the_generate_node_two_stage_on_workers_equals_here(loaded, on_workers, text_on_workers, files):
    here, encoder, _, _ = loaded
    (upsampler,) = node("LTX2UpsamplerLoader", files["upsampler"], on_workers)
    common = dict(negative_prompt="blurry", mode="two-stage", width=128, height=64, frames=9, fps=24.0, seed=2,
                  steps=2, upsampler=upsampler, distilled_lora=files["distilled"])
    want = node("LTX2Generate", here, encoder, "a cat on a beach", **common)
    got = node("LTX2Generate", on_workers, text_on_workers, "a cat on a beach", **common)  # prompts there too
    torch.testing.assert_close(got[0], want[0], atol=1e-4, rtol=0)
    torch.testing.assert_close(got[1]["waveform"], want[1]["waveform"], atol=1e-4, rtol=0)


def test_the_decode_node_on_workers_spreads_the_tiles_and_equals_here(loaded, on_workers, monkeypatch):
    """LTX2Decode of a model on workers: the video's tiles decoded across them (one task), the same frames and sound
    as the model here decodes (the same checkpoint and dtype on both sides)."""
    here = loaded[0]
    latent = AVLatent(torch.randn(1, 128, 5, 4, 4, generator=torch.Generator().manual_seed(1)),
                      torch.randn(1, 8, 13, 16, generator=torch.Generator().manual_seed(2)), 24.0)
    tasks, call = [], on_workers.host.workers.call
    monkeypatch.setattr(on_workers.host.workers, "call", lambda task, *a: tasks.append(task) or call(task, *a))
    want, got = (node("LTX2Decode", model, latent, 96, 32, seed=3) for model in (here, on_workers))
    assert [type(task).__name__ for task in tasks] == ["DecodeTask"]
    assert on_workers.host.video_decode.last.traffic.count == 8  # 2 temporal chunks x 2 x 2 spatial tiles
    torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(got[1]["waveform"], want[1]["waveform"], atol=0, rtol=0)  # decoded here on both


def test_cuda_only_options_and_a_released_handle_are_refused(files, loaded):
    _, _, conditioning, _ = loaded
    (model,) = node("LTX2CheckpointLoader", files["checkpoint"], "auto", "cpu",
                    parallel=Parallel(ParallelConfig(sp=2)), unique_id="released-test")
    pids = model.host.workers.pids
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    with pytest.raises(ValueError, match="CUDA options"):
        node("LTX2Sampler", model, conditioning, latent, 0, 2, "ltx2", compile=True)
    (again,) = node("LTX2CheckpointLoader", files["checkpoint"], "auto", "cpu", unique_id="released-test")
    assert all(_gone(pid) for pid in pids)  # loading another model in the same node stopped the workers
    with pytest.raises(ValueError, match="was released"):
        node("LTX2Sampler", model, conditioning, latent, 0, 2, "ltx2")
    assert again.host.workers is None and again.host.transformer is not None


def test_rank_zero_sends_a_preview_with_every_step_inside_comfyui(monkeypatch, loaded, on_workers):
    from nodes import bridge

    _, _, conditioning, _ = loaded
    shown = []
    monkeypatch.setattr(bridge, "IN_COMFYUI", True)
    monkeypatch.setattr(bridge, "interrupt_requested", lambda: False)
    monkeypatch.setattr(bridge, "progress_bar", lambda total, node_id, preview: lambda done, steps: shown.append(
        (done, steps, preview())))
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    (guidance,) = node("LTX2Guidance", on_workers, **GUIDED)
    node("LTX2Sampler", on_workers, conditioning, latent, 0, 3, "ltx2", guidance=guidance, unique_id="6")
    assert [(done, steps) for done, steps, _ in shown] == [(1, 3), (2, 3), (3, 3)]
    assert all(image.shape == (2, 3, 3) and image.dtype.name == "uint8" for _, _, image in shown)


def test_a_worker_launched_apart_attaches_to_the_loader(files, loaded, monkeypatch):
    """The layout node's `attach` address: the loader listens there and a worker started on its own (as torchrun
    would start it, here a single rank) serves the model; the result equals the in-process one."""
    import socket
    import subprocess
    import sys
    import time

    here, _, conditioning, _ = loaded
    monkeypatch.setenv("LTX2_WORKERS_KEY", "node-test")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    worker = subprocess.Popen([sys.executable, "-m", "ltx2_core.runtime", "--connect", address],
                              cwd=Path(__file__).resolve().parents[2])
    try:
        (layout,) = node("LTX2ParallelConfig", "{}", 1, attach=address)
        (model,) = node("LTX2CheckpointLoader", files["checkpoint"], "auto", "cpu", parallel=layout,
                        unique_id="attach-test")
        assert model.host.transformer is None and model.host.workers.pids == [worker.pid]
        (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
        results = [node("LTX2Sampler", m, conditioning, latent, 4, 2, "ltx2")[0] for m in (here, model)]
        model.release()
        time.sleep(2)
        assert worker.poll() is None  # told to stop, it waits for the next loader (as a torchrun launch would)
    finally:
        worker.kill()
    torch.testing.assert_close(results[1].video, results[0].video, atol=1e-4, rtol=0)


def test_comfyuis_unload_of_all_models_releases_every_loaded_handle_and_its_workers(files, monkeypatch):
    """What `POST /free` reaches (nodes.bridge wraps ComfyUI's unload_all_models): the handles go, the workers
    stop, and the loader's IS_CHANGED changes so ComfyUI runs it again rather than reuse the released handle."""
    from nodes import loaders

    monkeypatch.setattr(loaders, "_LOADED", {})  # only this test's handle (other tests' stay loaded)
    monkeypatch.setattr(loaders, "_TEXT_LOADED", {})
    (model,) = node("LTX2CheckpointLoader", files["checkpoint"], "auto", "cpu",
                    parallel=Parallel(ParallelConfig(cfg=2)), unique_id="free-test")
    (text,) = node("LTX2TextEncoderLoader", files["gemma"], model, "cpu", False, unique_id="free-text-test")
    (unnamed,) = node("LTX2TextEncoderLoader", files["gemma"], model, "cpu", False)  # no node id: not registered
    pids, before = model.host.workers.pids, loaders.LTX2CheckpointLoader.IS_CHANGED(ckpt_name=files["checkpoint"])
    loaders.release_all()
    assert all(_gone(pid) for pid in pids) and "free-test" not in loaders._LOADED and not loaders._TEXT_LOADED
    with pytest.raises(RuntimeError, match="encoder was released"):
        text.encode("a cat")
    with pytest.raises(ValueError, match="ComfyUI unloaded all models"):  # the model's check: no workers restarted
        unnamed.encode("a cat")
    assert all(_gone(pid) for pid in pids) and not model.host.workers.workers.active
    assert loaders.LTX2CheckpointLoader.IS_CHANGED(ckpt_name=files["checkpoint"]) != before
    with pytest.raises(ValueError, match="ComfyUI unloaded all models"):
        model.check_loaded()


def _decode_tasks(on_workers, monkeypatch) -> list:
    """The names of the tasks the workers are given from now on (each still run)."""
    tasks, call = [], on_workers.host.workers.call
    monkeypatch.setattr(on_workers.host.workers, "call", lambda task, *a: tasks.append(type(task).__name__)
                        or call(task, *a))
    return tasks


def test_the_dub_node_on_workers_decodes_there_and_equals_here(loaded, on_workers, files, tmp_path, monkeypatch):
    """LTX-2 Dub of a model on workers: both stages sampled there, the video's tiles decoded there (one task), the
    same frames and sound as the model here gives."""
    import math

    from support.model_files import write_lora

    here, _, conditioning, _ = loaded
    ic = str(write_lora(tmp_path / "dub-it.safetensors", seed=3, version="2.0",
                        metadata={"reference_downscale_factor": "1"}))
    clip = torch.rand(11, 64, 96, 3, generator=torch.Generator().manual_seed(0))
    t = torch.arange(8000) / 16000
    sound = {"waveform": (0.3 * torch.sin(2 * math.pi * 330 * t)).repeat(2, 1)[None], "sample_rate": 16000}
    args = (conditioning, clip, sound, 24.0, ic, 128, 64, 5, 1.0)
    want = node("LTX2Dub", here, node("LTX2UpsamplerLoader", files["upsampler"], here)[0], *args)
    tasks = _decode_tasks(on_workers, monkeypatch)
    got = node("LTX2Dub", on_workers, node("LTX2UpsamplerLoader", files["upsampler"], on_workers)[0], *args)
    assert tasks.count("DecodeTask") == 1 and on_workers.host.video_decode.last.refused is None
    assert got[0].shape == want[0].shape == (9, 64, 128, 3)
    torch.testing.assert_close(got[0], want[0], atol=1e-4, rtol=0)
    torch.testing.assert_close(got[1]["waveform"], want[1]["waveform"], atol=1e-4, rtol=0)


def test_the_long_video_node_on_workers_decodes_there_and_equals_here(loaded, on_workers, monkeypatch):
    """LTX-2 Generate Long of a model on workers: every window sampled there, the video decoded there, the same
    clip and sound as the model here gives."""
    here, encoder, _, _ = loaded
    args = dict(negative_prompt="blurry", mode="one-stage", width=64, height=64, fps=24.0, seed=2, steps=2,
                duration=2.0, window=25, overlap=8, window_prompts="a train arrives\n\na train leaves")
    want = node("LTX2GenerateLong", here, encoder, "a train passes", **args)
    tasks = _decode_tasks(on_workers, monkeypatch)
    got = node("LTX2GenerateLong", on_workers, encoder, "a train passes", **args)
    assert tasks.count("DecodeTask") >= 1 and on_workers.host.video_decode.last is not None
    assert got[0].shape == want[0].shape == (49, 64, 64, 3)
    torch.testing.assert_close(got[0], want[0], atol=1e-4, rtol=0)
    torch.testing.assert_close(got[1]["waveform"], want[1]["waveform"], atol=1e-4, rtol=0)
