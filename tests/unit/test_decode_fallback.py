"""`runtime.decode_fallback` without workers (a controller whose task fails as the real one reports it): which
worker errors are for memory and what the line says, the decode here (its generator's state: tests/distributed/
test_decode_fallback.py), other failures raised as they are, and a decode here out of memory too named with its
fix."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.demo import demo_models
from ltx2_core.memory.plan import MemoryPlanError
from ltx2_core.model.video_vae.tiling import TilingConfig, decode_video
from ltx2_core.parallel import ParallelConfig
from ltx2_core.runtime import WorkerError, decode_fallback
from ltx2_core.runtime.decode_fallback import out_of_memory
from ltx2_core.runtime.decode_task import WorkerDecode

CUDA = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of "
        "79.25 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.1 GiB in use.")
CPU = ("RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried "
       "to allocate 805306368 bytes.")
PEER = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer"
TILING = TilingConfig(spatial_tile=64, spatial_overlap=32, temporal_tile=16, temporal_overlap=8)


class FailingController:
    """What `WorkerDecode` asks of a controller, its task failing with `error` (the workers stopped)."""

    device_type, layout = "cpu", ParallelConfig(sp=2)

    def __init__(self, error: WorkerError) -> None:
        self.error, self.calls = error, 0

    def call(self, task, should_stop=None):
        self.calls += 1
        raise self.error


def test_which_worker_errors_are_for_memory():
    assert out_of_memory(WorkerError("...", {0: PEER, 1: CUDA})) == "rank 1: 2.00 GiB asked, 1.06 GiB free"
    assert out_of_memory(WorkerError("...", {0: CPU})) == "rank 0: 805306368 bytes asked"
    assert out_of_memory(WorkerError("...", {0: "torch.OutOfMemoryError: out of memory"})) == "rank 0"
    assert out_of_memory(WorkerError("...", {0: PEER})) is None
    assert out_of_memory(WorkerError("worker rank 1 exited with code -9")) is None  # died: no error line


def test_a_worker_out_of_memory_decodes_here_as_a_decode_here():
    decoder = demo_models("2.0").decoders.video
    latent = torch.randn(1, 128, 3, 3, 3, generator=torch.Generator().manual_seed(1))
    want = decode_video(latent, decoder, TILING)
    lines: list[str] = []
    decode = WorkerDecode(FailingController(WorkerError("worker rank 1 failed: ...", {1: CUDA})),
                          report=lines.append)
    torch.testing.assert_close(decode(latent, decoder, TILING), want, atol=1e-5, rtol=0)
    assert len(lines) == 1 and "ran out of memory (rank 1: 2.00 GiB asked, 1.06 GiB free)" in lines[0]


def test_other_failures_are_raised_as_they_are():
    error = WorkerError("worker rank 1 exited with code -9; the workers were stopped")
    decode = WorkerDecode(FailingController(error))
    with pytest.raises(WorkerError) as raised:
        decode(torch.zeros(1, 128, 2, 2, 2), demo_models("2.0").decoders.video, TILING)
    assert raised.value is error and decode.fell_back is None


def test_a_decode_here_out_of_memory_too_names_the_fix(monkeypatch):
    def no_room(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.00 GiB. GPU 0 ...")

    monkeypatch.setattr(decode_fallback, "decode_video", no_room)
    decode = WorkerDecode(FailingController(WorkerError("...", {1: CUDA})), report=lambda line: None)
    with pytest.raises(MemoryPlanError, match=r"on the workers \(rank 1: 2.00 GiB asked, 1.06 GiB free\) and in "
                       r"this process on cpu too \(CUDA out of memory. Tried to allocate 3.00 GiB.*\): decode with "
                       r"smaller tiles \(the decode's spatial or temporal tile\), or generate fewer frames"):
        decode(torch.zeros(1, 128, 2, 2, 2), demo_models("2.0").decoders.video, TILING)


def test_hdrs_float32_decode_falls_back_in_float32_and_leaves_the_decoder_in_its_dtype():
    """HDR's decode (`float32_decode`): the fallback here decodes in float32 as `decode_hdr` does here, not in the
    decoder's bf16, and puts the decoder back in bf16."""
    from ltx2_core.model.float32 import in_float32
    from ltx2_core.runtime.float32_decode import float32_decode

    decoder = demo_models("2.0").decoders.video.to(torch.bfloat16)
    latent = torch.randn(1, 128, 3, 3, 3, generator=torch.Generator().manual_seed(2))
    with in_float32(decoder):
        want = decode_video(latent, decoder, TILING)
    controller = FailingController(WorkerError("...", {1: CUDA}))
    decode = float32_decode(WorkerDecode(controller, report=lambda line: None))
    got = decode(latent, decoder, TILING)
    assert got.dtype == torch.float32 and controller.calls == 1
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert {t.dtype for t in decoder.parameters()} == {torch.bfloat16}
    assert (got - decode_video(latent.bfloat16(), decoder, TILING).float()).abs().max() > 1e-3  # bf16 differs
