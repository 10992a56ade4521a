"""LTX-2 HDR (IC-LoRA) and LTX-2 Save EXR on the tiny model: the node runs the pipeline's HDR request on ComfyUI's
IMAGE frames (its preview the sRGB of its linear output, which equals `hdr_pipeline.generate_hdr` on the same
request), Save EXR writes the frames and the preview into a fresh folder, and the refusals name their fix before
any model work: a model without the HDR IC-LoRA, a size under 64, OpenEXR missing (only in the writer)."""

from __future__ import annotations


import pytest
import torch

from ltx2_core import Models
from ltx2_core.exr import read_exr
from ltx2_core.hdr import HDR, srgb_preview
from ltx2_core.hdr_pipeline import generate_hdr
from ltx2_core.pipeline import LocalSampler, Request
from ltx2_core.video_io import VideoFrames
from nodes import bridge
from support.model_files import write_lora
from support.node_calls import node
from support.imports import without_module


@pytest.fixture(scope="module")
def hdr_model(loaded, tmp_path_factory):
    path = write_lora(tmp_path_factory.mktemp("hdr") / "hdr.safetensors", seed=3, version="2.0",
                      metadata={"hdr_transform": "logc3"})
    (model,) = node("LTX2LoraLoader", loaded[0], str(path), 1.0)
    return model


def _frames() -> torch.Tensor:
    return torch.rand(9, 64, 96, 3, generator=torch.Generator().manual_seed(5))


def test_the_hdr_node_runs_the_pipelines_request_and_save_exr_writes_it(loaded, hdr_model, files, tmp_path,
                                                                        monkeypatch):
    (upsampler,) = node("LTX2UpsamplerLoader", files["upsampler"], hdr_model)
    conditioning = loaded[2]
    preview, hdr, fps = node("LTX2HDR", hdr_model, conditioning, upsampler, _frames(), 24.0, 100, 70, 0, 4, 0.9,
                             False)
    assert preview.shape == (9, 70, 100, 3) and fps == 24.0 and torch.equal(preview, srgb_preview(hdr.linear))
    request = Request("p", width=100, height=70, frames=9, seed=4, mode="hdr",
                      hdr=HDR(VideoFrames(_frames(), 24.0), 0.9))
    models = Models(hdr_model.host.transformer, None, hdr_model.decoders, upsampler, None, hdr_model.video_encoder,
                    None, tuple(hdr_model.loras))
    expected = generate_hdr(request, models, sampler=LocalSampler(hdr_model.host.transformer),
                            positive=conditioning.positive)
    torch.testing.assert_close(hdr.linear, expected.linear, atol=1e-5, rtol=1e-5)  # the same run
    monkeypatch.setattr(bridge, "output_folder", lambda: str(tmp_path))
    for expected_folder in ("clip_00001", "clip_00002"):
        ui = node("LTX2SaveEXR", hdr, "clip", True, True)
        folder = tmp_path / expected_folder
        assert str(folder) in ui["ui"]["text"][0]
        assert sorted(p.name for p in folder.iterdir()) == [f"frame_{i:05d}.exr" for i in range(9)] + ["preview.mp4"]
    pixels, _ = read_exr(tmp_path / "clip_00001" / "frame_00003.exr")
    torch.testing.assert_close(pixels, hdr.linear[3].half().float(), atol=0, rtol=0)  # float16 rounding only


def test_refusals_name_the_fix(loaded, hdr_model, files, tmp_path, monkeypatch):
    (upsampler,) = node("LTX2UpsamplerLoader", files["upsampler"], hdr_model)
    with pytest.raises(ValueError, match="load the HDR IC-LoRA"):
        node("LTX2HDR", loaded[0], loaded[2], upsampler, _frames(), 24.0, 0, 0, 0, 4, 1.0, False)
    with pytest.raises(ValueError, match="at least 64x64"):
        node("LTX2HDR", hdr_model, loaded[2], upsampler, _frames(), 24.0, 40, 0, 0, 4, 1.0, False)
    with pytest.raises(ValueError, match="filename_prefix '../x' leaves the output folder"):
        monkeypatch.setattr(bridge, "output_folder", lambda: str(tmp_path))
        node("LTX2SaveEXR", None, "../x")
    without_module(monkeypatch, "OpenEXR")
    with pytest.raises(ValueError, match="pip install OpenEXR"):
        node("LTX2SaveEXR", None, "x")
    assert not any(tmp_path.iterdir())  # nothing written


def test_the_hdr_node_on_two_sequence_parallel_workers_gives_what_it_gives_here(loaded, hdr_model, files,
                                                                               monkeypatch):
    """The transformer on two CPU worker processes (gloo, Ulysses sp 2): the video-only stages and tiles travel
    without audio, the HDR IC-LoRA is read from its file by the workers for every tile, and the video is decoded
    there in float32 (one DecodeTask asking for it)."""
    (layout,) = node("LTX2ParallelConfig", '{"cfg": 1, "sp": 2, "tp": 1}', 4)
    (spread,) = node("LTX2CheckpointLoader", files["checkpoint"], "auto", "cpu", parallel=layout,
                     unique_id="hdr-workers")
    controller, decodes = spread.host.workers, []
    call = controller.call
    monkeypatch.setattr(controller, "call", lambda task, *a: decodes.append(task.float32) or call(task, *a))
    try:
        (spread_hdr,) = node("LTX2LoraLoader", spread, hdr_model.loras[0][0].path, 1.0)
        results = []
        for model in (hdr_model, spread_hdr):
            (upsampler,) = node("LTX2UpsamplerLoader", files["upsampler"], model)
            results.append(node("LTX2HDR", model, loaded[2], upsampler, _frames(), 24.0, 64, 64, 0, 4, 0.9, False))
        assert spread.host.transformer is None
    finally:
        spread.release()
    assert decodes == [True]  # the only task: the video's float32 decode across the workers
    torch.testing.assert_close(results[1][1].linear, results[0][1].linear, atol=1e-3, rtol=1e-3)
