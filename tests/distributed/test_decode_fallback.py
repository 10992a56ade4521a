"""The video decode on workers when a worker runs out of memory (`runtime.decode_fallback`, two spawned gloo
workers, the failure raised inside the decode on rank 1 as torch's allocator raises it, while rank 0 waits in the
decode's collectives): the caller decodes the video itself, equal to a decode here, its generator continuing as
after one; the workers are stopped (no process or rendezvous folder left) and the next decode runs on them again.
Any other failure still raises WorkerError."""

from __future__ import annotations

import os

import pytest
import torch

from ltx2_core.demo import demo_models
from ltx2_core.loader import load_video_decoder
from ltx2_core.model.video_vae.tiling import TilingConfig, decode_video
from ltx2_core.parallel import ParallelConfig
from ltx2_core.runtime import WorkerError, decode_task
from ltx2_core.runtime.decode_task import WorkerDecode
from support.decode_faults import BrokenOnRankOne, OutOfMemoryOnRankOne
from support.workers import diffusion_decoder_files, gone

# as tests/distributed/test_worker_decode.py: 8 tiles of the convolutional decoder, 4 a worker; spatial tiles only
CONV_TILING = TilingConfig(spatial_tile=64, spatial_overlap=32, temporal_tile=16, temporal_overlap=8)
SPATIAL_TILING = TilingConfig(spatial_tile=64, spatial_overlap=32, temporal_tile=None, temporal_overlap=0)


def _latent(channels: int, size: tuple[int, int, int], seed: int = 3) -> torch.Tensor:
    return torch.randn(1, channels, *size, generator=torch.Generator().manual_seed(seed))


def test_a_worker_out_of_memory_is_decoded_here_and_the_next_decode_runs_on_the_workers(workers, monkeypatch,
                                                                                           capsys):
    controller = workers(ParallelConfig(sp=2))
    decoder, latent = demo_models("2.0").decoders.video, _latent(128, (3, 3, 3))
    want = decode_video(latent, decoder, CONV_TILING)
    controller.start()
    pids, folder = controller.pids, controller.workers.folder
    decode = WorkerDecode(controller)
    with monkeypatch.context() as patch:
        patch.setattr(decode_task, "DecodeTask", OutOfMemoryOnRankOne)
        got = decode(latent, decoder, CONV_TILING, output_device="cpu")
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert decode.fell_back == "rank 1: 1.50 GiB asked, 612.00 MiB free" and decode.last is None
    printed = capsys.readouterr().out.splitlines()
    assert [line for line in printed if "ran out of memory" in line] == [
        "LTX-2: the video decode on the workers ran out of memory (rank 1: 1.50 GiB asked, 612.00 MiB free); "
        "decoding it in this process on cpu instead (the workers were stopped and start again with the next job)"]
    # the workers (stuck in a collective behind the failed rank) were stopped: no process, pipe or folder is left
    assert not controller.workers.active and all(gone(pid) for pid in pids) and not os.path.exists(folder)
    again = decode(latent, decoder, CONV_TILING, output_device="cpu")
    assert decode.fell_back is None and decode.last.traffic.count == 8  # on the workers, started again
    assert not set(controller.pids) & set(pids)
    torch.testing.assert_close(again, want, atol=1e-5, rtol=0)


def test_the_diffusion_decoder_decoded_here_after_a_worker_out_of_memory_continues_the_generator(
        tmp_path, workers, monkeypatch):
    """LTX-2.5's diffusion decoder draws its starting noise: the decode here starts from the state the workers were
    given, so the video and the generator after it are a decode here's."""
    files = diffusion_decoder_files(tmp_path)
    decoder = load_video_decoder(files.vae)
    latent = _latent(128, (1, 2, 3)).to(next(decoder.parameters()).dtype)
    here, there = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    want = decode_video(latent, decoder, SPATIAL_TILING, generator=here)
    decode = WorkerDecode(workers(ParallelConfig(sp=2), files), report=lambda line: None)
    monkeypatch.setattr(decode_task, "DecodeTask", OutOfMemoryOnRankOne)
    got = decode(latent, decoder, SPATIAL_TILING, generator=there, output_device="cpu")
    assert decode.fell_back is not None
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert torch.equal(there.get_state(), here.get_state())  # the same draws from the same state: exact


def test_any_other_worker_failure_still_raises(workers, monkeypatch):
    controller = workers(ParallelConfig(sp=2))
    decoder, latent = demo_models("2.0").decoders.video, _latent(128, (2, 2, 2))
    decode = WorkerDecode(controller)
    monkeypatch.setattr(decode_task, "DecodeTask", BrokenOnRankOne)
    with pytest.raises(WorkerError, match="rank 1 failed: RuntimeError: a tile's shape does not match"):
        decode(latent, decoder, CONV_TILING, output_device="cpu")
    assert decode.fell_back is None
