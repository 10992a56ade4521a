"""HDR's float32 decode across two spawned gloo workers (`runtime.float32_decode`, `DecodeTask.float32`): with the
workers' decoder in bfloat16 (the caller's too, compared in that dtype), the linear light equals `decode_hdr` here
(fp32, ≤ 1e-5) and differs from a bfloat16 decode, every worker's kept decoder is back in bfloat16 after it (and
still decodes as the caller's bfloat16 decoder does), nothing of the caller's decoder moves; and an HDR request
run by `generate_on_workers` (its entry point on workers) decodes there and equals one process."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TilingConfig
from ltx2_core.demo import demo_models
from ltx2_core.hdr import HDR, hdr_config
from ltx2_core.hdr_pipeline import decode_hdr, generate_hdr, hdr_linear
from ltx2_core.loader.lora import load_lora
from ltx2_core.media import video_to_frames, write_mp4
from ltx2_core.model.video_vae.tiling import decode_video
from ltx2_core.parallel import ParallelConfig
from ltx2_core.pipeline import LocalSampler, generate
from ltx2_core.request import Request
from ltx2_core.runtime import Controller, WorkerDecode, generate_on_workers
from ltx2_core.runtime.decode_task import Signature
from ltx2_core.runtime.float32_decode import float32_decode
from ltx2_core.stages import AVLatent
from support.kept_decoder import KeptDtypes
from support.model_files import write_lora
from support.workers import FILES

# 2 latent frames x 2 rows x 2 columns of tiles: 8 tiles, 4 a worker
TILING = TilingConfig(spatial_tile=64, spatial_overlap=32, temporal_tile=16, temporal_overlap=8)
TRANSFER = hdr_config({"hdr_transform": "logc3"}).transfer


def test_hdr_decode_on_bf16_workers_equals_fp32_here_and_their_decoder_stays_bf16(workers):
    workers.close()  # one set of workers at a time: these load their decoder in bfloat16
    controller = Controller(FILES, ParallelConfig(sp=2), dtype=torch.bfloat16, threads=1)
    try:
        decoders = demo_models("2.0").decoders
        decoders = decoders._replace(video=decoders.video.to(torch.bfloat16))  # the workers' weights and dtype
        signature = Signature.of(decoders.video)
        latent = AVLatent(torch.randn(1, 128, 3, 3, 3, generator=torch.Generator().manual_seed(3)), None, 24.0)
        want = decode_hdr(latent, decoders, TRANSFER, (90, 70), False, TILING)
        decode = float32_decode(WorkerDecode(controller))
        got = decode_hdr(latent, decoders, TRANSFER, (90, 70), False, TILING, video_decode=decode)
        assert got.shape == want.shape == (17, 70, 90, 3)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)  # fp32 on both sides, the same sums per tile
        assert decode.last.traffic.count == 8 and decode.last.traffic.tiles == [0, 2, 4, 6]  # spread over both
        assert controller.call(KeptDtypes()) == [["torch.bfloat16"]] * 2  # each worker's decoder put back
        assert Signature.of(decoders.video) == signature  # the caller's decoder untouched (no float32 copy)
        plain = WorkerDecode(controller)(latent.video.to(torch.bfloat16), decoders.video, TILING, output_device="cpu")
        here = decode_video(latent.video.to(torch.bfloat16), decoders.video, TILING)
        torch.testing.assert_close(plain, here, atol=1e-5, rtol=0)  # the kept bf16 weights decode as the caller's
        bf16 = hdr_linear(video_to_frames(plain.float())[0], TRANSFER, (90, 70), False)
        assert (bf16 - want).abs().max() > 1e-3  # the float32 decode is not the bfloat16 one
    finally:
        controller.shutdown()


@pytest.fixture(scope="module")
def hdr_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hdr_workers")
    lora = write_lora(folder / "hdr.safetensors", seed=2, version="2.0", metadata={"hdr_transform": "logc3"})
    video = write_mp4(folder / "sdr.mp4", torch.rand(9, 64, 96, 3, generator=torch.Generator().manual_seed(1)), 24)
    models = demo_models("2.0")._replace(ic_loras=((load_lora(lora), 1.0),))
    request = Request("a sunset", mode="hdr", width=90, height=64, frames=9, seed=5, hdr=HDR(str(video), 0.8))
    return request, models


def test_an_hdr_request_on_workers_decodes_there_in_float32_and_equals_one_process(hdr_run, workers, monkeypatch):
    request, models = hdr_run
    want = generate_hdr(request, models, sampler=LocalSampler(models.transformer))
    controller, tasks = workers(ParallelConfig(sp=2)), []
    call = controller.call
    monkeypatch.setattr(controller, "call", lambda task, *a: tasks.append(task) or call(task, *a))
    got = generate_on_workers(controller, request, models._replace(transformer=None))
    assert [(type(t).__name__, t.float32) for t in tasks] == [("DecodeTask", True)]  # decoded there, in float32
    assert got.linear.shape == want.linear.shape == (9, 64, 90, 3)
    torch.testing.assert_close(got.linear, want.linear, atol=1e-3, rtol=1e-4)  # sampled over sp 2: ~1e-5 apart


def test_hdr_refuses_a_decode_that_is_not_float32(hdr_run, workers):
    request, models = hdr_run
    from ltx2_core.pipeline import Distribution

    decode = WorkerDecode(workers(ParallelConfig(sp=2)))
    with pytest.raises(ValueError, match="HDR decodes in float32 .* wrap it with ltx2_core.runtime.float32_decode"):
        generate(request, models, distribution=Distribution(video_decode=decode))
