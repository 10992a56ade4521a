"""Per-block torch.compile (one graph for every block with the same perturbation skips) and the CUDA-graph step
(CUDA only; on the CPU it refuses clearly), also for text to audio (no video state)."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.compile import CudaGraphStep, compile_blocks
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_positions, video_positions
from ltx2_core.sampling import GuidanceParams, denoise, guided_setup, ltx2_sigmas, noised_state
from ltx2_core.types import TextEmbeddings

FULL = GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(2,), rescale=0.7, modality=3.0)


def _run(device="cpu", layers=6, audio_only=False):
    model = demo_transformer(TransformerConfig.tiny("2.0", num_layers=layers)).to(device)
    g = torch.Generator().manual_seed(0)
    text = TextEmbeddings(torch.randn(1, 5, 12, generator=g), torch.randn(1, 5, 12, generator=g))
    positions = None if audio_only else video_positions(2, 2, 3, 24.0)
    plan = guided_setup(model, text, text, positions, audio_positions(9), FULL, FULL)
    video = noised_state(torch.zeros(1, 12, 128, device=device), torch.randn(1, 12, 128, generator=g).to(device))
    audio = noised_state(torch.zeros(1, 9, 128, device=device), torch.randn(1, 9, 128, generator=g).to(device))
    return model, plan, None if audio_only else video, audio


def _assert_close(got, want):
    for got_state, want_state in zip(got, want):
        assert (got_state is None) == (want_state is None)
        if got_state is not None:
            torch.testing.assert_close(got_state.latent, want_state.latent, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("audio_only", [False, True], ids=["audio+video", "audio-only"])
def test_compiled_blocks_share_graphs_and_match_eager(audio_only):
    from torch._dynamo.utils import counters

    model, plan, video, audio = _run(layers=6, audio_only=audio_only)
    eager = denoise(plan, video, audio, ltx2_sigmas(2))
    torch._dynamo.reset()
    counters.clear()
    compile_blocks(model, backend="eager", fullgraph=True)
    compiled = denoise(plan, video, audio, ltx2_sigmas(2))
    if not audio_only:
        torch.testing.assert_close(compiled[0].latent, eager[0].latent, atol=1e-6, rtol=1e-6)
    assert (compiled[0] is None) == audio_only
    torch.testing.assert_close(compiled[1].latent, eager[1].latent, atol=1e-6, rtol=1e-6)
    # six blocks, two kinds: with and without the STG block; steps and blocks never recompile
    assert counters["stats"]["unique_graphs"] == 2, dict(counters["stats"])


@pytest.mark.parametrize("audio_only", [False, True], ids=["audio+video", "audio-only"])
def test_cuda_graph_step_refuses_the_cpu(audio_only):
    _, plan, video, audio = _run(layers=3, audio_only=audio_only)
    with pytest.raises(RuntimeError, match="CUDA device"):
        denoise(plan, video, audio, ltx2_sigmas(2), step=CudaGraphStep())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA GPU")
@pytest.mark.parametrize("audio_only", [False, True], ids=["audio+video", "audio-only"])
def test_cuda_graph_step_matches_the_eager_loop(audio_only):
    _, plan, video, audio = _run("cuda", layers=3, audio_only=audio_only)
    sigmas = ltx2_sigmas(4, device="cuda")
    eager = denoise(plan, video, audio, sigmas)
    step = CudaGraphStep()
    captured = denoise(plan, video, audio, sigmas, step=step)
    _assert_close(captured, eager)
    _, other_plan, _, _ = _run("cuda", layers=3, audio_only=audio_only)
    with pytest.raises(ValueError, match="another run"):
        step(other_plan, video, audio, sigmas[0], sigmas[1])
