"""The video decode spread over the persistent workers (`runtime.decode_task`, two spawned gloo workers): the video
equals the one-device tiled decode (the convolutional decoder over spatial and temporal tiles; LTX-2.5's diffusion
decoder over its stage-4-5 tiles from a seeded generator, whose state then continues as after a decode here), the
decoder the workers load is kept across decodes, another decoder is refused, and a whole run equals one process."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from ltx2_core import TilingConfig
from ltx2_core.demo import demo_models
from ltx2_core.loader import load_video_decoder
from ltx2_core.model.video_vae.tiling import decode_video, tile_axes, video_tiles
from ltx2_core.parallel import ParallelConfig
from ltx2_core.runtime.decode_task import WorkerDecode
from support.workers import REQUEST, diffusion_decoder_files, run_on

# 2 latent frames x 2 rows x 2 columns of tiles: 8 tiles, 4 a worker
CONV_TILING = TilingConfig(spatial_tile=64, spatial_overlap=32, temporal_tile=16, temporal_overlap=8)
SPATIAL_TILING = TilingConfig(spatial_tile=64, spatial_overlap=32, temporal_tile=None, temporal_overlap=0)


def _latent(channels: int, size: tuple[int, int, int], seed: int = 3) -> torch.Tensor:
    return torch.randn(1, channels, *size, generator=torch.Generator().manual_seed(seed))


def test_the_workers_decode_equals_one_device_and_keeps_its_decoder(workers):
    controller = workers(ParallelConfig(sp=2))
    decoder = demo_models("2.0").decoders.video  # the workers' demo files: the same weights
    latent = _latent(128, (3, 3, 3))
    assert len(video_tiles(tile_axes(tuple(latent.shape[2:]), CONV_TILING))) == 8
    decode = WorkerDecode(controller)
    want = decode_video(latent, decoder, CONV_TILING)
    got = decode(latent, decoder, CONV_TILING, output_device="cpu")
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)  # fp32; the same sums in the same order
    first, pids = decode.last, controller.pids
    assert first.traffic.count == 8 and first.traffic.tiles == [0, 2, 4, 6] and first.traffic.received_bytes > 0
    again = decode(_latent(128, (3, 3, 3), seed=4), decoder, CONV_TILING, output_device="cpu")
    assert decode.last.uses == first.uses + 1 and controller.pids == pids  # the same decoder object, kept
    assert (again - got).abs().max() > 0.01


def test_another_decoder_is_refused_and_the_workers_stay(workers):
    controller = workers(ParallelConfig(sp=2))
    other = demo_models("2.3").decoders.video  # another release's decoder
    with pytest.raises(ValueError, match="is not the one the workers decode with .* decode with the model's own"):
        WorkerDecode(controller)(_latent(128, (2, 2, 2)), other, CONV_TILING)
    pids = controller.pids  # read once they run: a fresh (or, after a failed job, stopped) controller starts lazily
    assert len(pids) == 2
    wider = demo_models("2.0").decoders.video.to(torch.float64)  # the same weights in another dtype
    with pytest.raises(ValueError, match="float64"):
        WorkerDecode(controller)(_latent(128, (2, 2, 2)).double(), wider, CONV_TILING)
    assert controller.pids == pids  # a refusal is no failure: the workers serve on


def test_a_run_on_workers_decodes_there_and_equals_one_process(local, workers, monkeypatch):
    models, want = local
    controller, tasks = workers(ParallelConfig(sp=2)), []
    call = controller.call
    monkeypatch.setattr(controller, "call", lambda task, *args: tasks.append(type(task).__name__) or call(task, *args))
    got = run_on(controller, models)
    assert tasks == ["DecodeTask"]  # the video decoded on the workers
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    torch.testing.assert_close(got.waveform, want.waveform, atol=1e-4, rtol=0)


def test_a_long_clip_decoded_on_workers_equals_one_process(workers):
    """The long-video node's path: every window sampled on the workers, the whole clip decoded across them."""
    from ltx2_core import Windows, generate_long
    from ltx2_core.pipeline import Distribution
    from ltx2_core.runtime import WorkerSampler

    models = demo_models("2.0")
    request = replace(REQUEST, width=64, height=64, frames=41, windows=Windows(25, 8, ("a train", "a boat")))
    want = generate_long(request, models)
    controller = workers(ParallelConfig(sp=2))
    decode = WorkerDecode(controller)
    got = generate_long(request, models._replace(transformer=None), sampler=WorkerSampler(controller),
                        distribution=Distribution(video_decode=decode))
    assert decode.last is not None and decode.last.video is not None  # decoded there (one tile at this size)
    torch.testing.assert_close(got.frames, want.frames, atol=1e-4, rtol=0)
    torch.testing.assert_close(got.waveform, want.waveform, atol=1e-4, rtol=0)


def test_the_diffusion_decoder_on_workers_equals_one_device_and_continues_the_generator(tmp_path, workers):
    files = diffusion_decoder_files(tmp_path)
    decoder = load_video_decoder(files.vae)
    latent = _latent(128, (1, 2, 3)).to(next(decoder.parameters()).dtype)
    here, there = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    want = decode_video(latent, decoder, SPATIAL_TILING, generator=here)
    decode = WorkerDecode(workers(ParallelConfig(sp=2), files))
    got = decode(latent, decoder, SPATIAL_TILING, generator=there, output_device="cpu")
    assert decode.last.traffic.count == 4 and decode.last.traffic.tiles == [0, 2]  # 2 x 2 stage-4-5 tiles
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert torch.equal(there.get_state(), here.get_state())  # the starting noise drawn as here
