"""The Host seam: here and on workers, a host answers the same questions (config, device, sampler, memory check,
tiles, release), so a caller samples a stage the same way on either. The workers' sampling itself runs through the
nodes in tests/nodes/test_nodes_on_workers.py; here the workers host is built on a real, unstarted Controller."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.demo import demo_lora, demo_transformer
from ltx2_core.hosts import Host, LocalHost, WorkerHost
from ltx2_core.loader.lora import fused_loras
from ltx2_core.memory.footprint import Job
from ltx2_core.model_files import ModelFiles
from ltx2_core.model.video_vae.tiling import TilingConfig
from ltx2_core.parallel import ParallelConfig
from ltx2_core.preview import LatentPreview
from ltx2_core.runtime import Controller, WorkerSampler
from ltx2_core.sampling import ltx2_sigmas
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import empty_latent
from ltx2_core.types import TextEmbeddings


def _sample(host: Host, loras=()):
    latent = empty_latent(64, 64, 9, 24.0)
    config, generator = host.config, torch.Generator().manual_seed(1)
    text = TextEmbeddings(torch.randn(1, 8, config.caption_channels or config.video.context_dim, generator=generator),
                          torch.randn(1, 8, config.caption_channels or config.audio.context_dim, generator=generator))
    generator = torch.Generator(host.device).manual_seed(0)
    with host.sampler(loras) as (sampler, _):
        return sampler(text, None, latent, Stage(ltx2_sigmas(2)), generator)


def test_a_local_host_fuses_the_handles_loras_while_the_run_lasts():
    transformer = demo_transformer()
    host = LocalHost(transformer, "cpu", torch.float32)
    lora = demo_lora(transformer)
    before = {k: v.clone() for k, v in transformer.state_dict().items()}
    with_lora = _sample(host, ((lora, 0.5),))
    with fused_loras(transformer, ((lora, 0.5),)):
        fused_by_hand = _sample(LocalHost(transformer, "cpu", torch.float32))
    for got, want in zip(with_lora[:2], fused_by_hand[:2]):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)  # fp32, the same deltas added in one order
    for name, value in transformer.state_dict().items():
        assert torch.equal(value, before[name]), name  # restored copies: exact
    assert host.memory_problem(Job(9, 64, 64)) is None and host.tiling() == TilingConfig()
    host.release()
    assert all(p.is_meta for p in transformer.parameters())


def test_both_hosts_answer_the_same_questions():
    local = LocalHost(demo_transformer(), "cpu", torch.float32)
    controller = Controller(ModelFiles(version="2.0"), ParallelConfig(cfg=2), device_type="cpu")
    workers = WorkerHost(controller)
    previews = LatentPreview((torch.zeros(128, 3), torch.zeros(3)), 2, 2, 2)
    for host in (local, workers):
        assert host.config == local.config and host.device == torch.device("cpu")
        with host.sampler(previews=previews) as (sampler, preview):
            assert callable(sampler) and sampler.device == torch.device("cpu") and preview is not None
        with host.sampler() as (_, preview):
            assert preview is None  # no previews asked for
        assert host.memory_problem(Job(9, 64, 64)) is None and host.tiling() == TilingConfig()
        # the whole request is counted on either (on workers the host's share: no machine holds 2 TB of frames)
        assert "would fit" in host.memory_problem(Job(1441, 8192, 8192, passes=4))
    with workers.sampler(compile=True, previews=previews) as (sampler, _):
        assert isinstance(sampler, WorkerSampler) and sampler.compile and sampler.projection is not None
    with pytest.raises(ValueError, match="cuda_graphs is not available with a multi-GPU layout"), \
            workers.sampler(cuda_graphs=True):
        pass
    workers.release()
    assert not controller.workers.active


def test_a_streaming_local_host_refuses_compile_and_cuda_graphs():
    files = ModelFiles(version="2.0")
    plan = files.plan("cpu", frames=9, height=64, width=64, passes=1, memory="stream")
    assert plan is not None and plan.streamed_blocks > 0
    host = LocalHost(files.load("cpu", plan=plan).transformer, "cpu", torch.float32, plan)
    with pytest.raises(ValueError, match="need every block resident"), host.sampler(compile=True):
        pass
    assert host.tiling() == plan.tiling()
