"""The captured step's bookkeeping on the CPU: `CudaGraphStep` with `EagerReplay` (capture runs the step once and
keeps its outputs; each replay re-runs it into them, reading the static input buffers as a CUDA graph reads them)
gives the eager loop's latents for Euler and ancestral steps, guided and distilled (one pass), audio+video and
audio-only; ancestral steps draw the same noise in the same order as eagerly (drawn outside the graph, before each
replay). And when "auto" captures: a CUDA device, every block resident, one GPU."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.compile import CudaGraphStep, EagerReplay, graph_setting, graphs_problem, use_graphs
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_positions, video_positions
from ltx2_core.memory.streaming import stream_blocks
from ltx2_core.pipeline import LocalSampler
from ltx2_core.sampling import DISTILLED_SIGMAS, GuidanceParams, denoise, guided_setup, noised_state, sigma_table
from ltx2_core.sampling.denoise import AncestralStep, guided_prediction
from ltx2_core.sampling.stage import Stage
from ltx2_core.sampling.steps import euler_ancestral_step
from ltx2_core.stages import empty_latent, sample
from ltx2_core.types import TextEmbeddings

FULL = GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(1,), rescale=0.7, modality=3.0)
SEED = 10007
# the replay runs the same float ops on the same inputs as the eager step; the tolerance only allows for kernels
# that may pick another reduction order for a copied (fresh) buffer
TOL = dict(atol=1e-6, rtol=1e-6)


def _run(guided: bool, audio_only: bool, layers: int = 3):
    model = demo_transformer(TransformerConfig.tiny("2.0", num_layers=layers), seed=1)
    g = torch.Generator().manual_seed(0)
    text = TextEmbeddings(torch.randn(1, 5, 12, generator=g), torch.randn(1, 5, 12, generator=g))
    positions = None if audio_only else video_positions(2, 2, 3, 24.0)
    guidance = FULL if guided else None
    setup = guided_setup(model, text, text if guided else None, positions, audio_positions(9), guidance, guidance)
    video = noised_state(torch.zeros(1, 12, 128), torch.randn(1, 12, 128, generator=g))
    audio = noised_state(torch.zeros(1, 9, 128), torch.randn(1, 9, 128, generator=g))
    return model, setup, None if audio_only else video, audio


def _close(got, want):
    for got_state, want_state in zip(got, want):
        assert (got_state is None) == (want_state is None)
        if got_state is not None:
            torch.testing.assert_close(got_state.latent, want_state.latent, **TOL)


CASES = [(guided, audio_only) for guided in (True, False) for audio_only in (False, True)]
IDS = [f"{'guided' if g else 'distilled'}-{'audio-only' if a else 'audio+video'}" for g, a in CASES]


@pytest.mark.parametrize("guided,audio_only", CASES, ids=IDS)
def test_a_replayed_euler_run_equals_the_eager_run(guided, audio_only):
    _, setup, video, audio = _run(guided, audio_only)
    sigmas = sigma_table(DISTILLED_SIGMAS)
    eager = denoise(setup, video, audio, sigmas)
    backend = EagerReplay()
    step = CudaGraphStep(backend=backend)
    replayed = denoise(setup, video, audio, sigmas, step=step)
    _close(replayed, eager)
    assert step.graph.replays == len(DISTILLED_SIGMAS) - 1  # captured once, replayed at every step
    assert not torch.equal(replayed[1].latent, audio.latent)  # the run moved the latents


@pytest.mark.parametrize("guided,audio_only", CASES, ids=IDS)
def test_a_replayed_ancestral_run_draws_the_same_noise_and_equals_the_eager_run(guided, audio_only):
    _, setup, video, audio = _run(guided, audio_only)
    sigmas = sigma_table(DISTILLED_SIGMAS)
    eager_generator, replay_generator = torch.Generator().manual_seed(SEED), torch.Generator().manual_seed(SEED)
    eager = denoise(setup, video, audio, sigmas, step=AncestralStep(eager_generator))
    step = CudaGraphStep(backend=EagerReplay()).around(AncestralStep(replay_generator))
    replayed = denoise(setup, video, audio, sigmas, step=step)
    _close(replayed, eager)
    # as many draws, in the same order: the generators end in the same state (a pure copy of the state bytes)
    assert torch.equal(eager_generator.get_state(), replay_generator.get_state())


@pytest.mark.parametrize("audio_only", [False, True], ids=["audio+video", "audio-only"])
def test_drawing_before_the_prediction_gives_the_draws_of_the_reference_order(audio_only):
    """The reference's ancestral loop draws after the prediction; the step's own generator draws nothing else, so
    drawing first (what a captured step needs) gives the same noise: a hand-written loop in the reference's order."""
    _, setup, video, audio = _run(True, audio_only)
    sigmas = sigma_table(DISTILLED_SIGMAS)
    got = denoise(setup, video, audio, sigmas, step=AncestralStep(torch.Generator().manual_seed(SEED)))
    generator = torch.Generator().manual_seed(SEED)
    for index in range(len(DISTILLED_SIGMAS) - 1):
        sigma, sigma_next = sigmas[index], sigmas[index + 1]
        video_x0, audio_x0 = guided_prediction(setup, video, audio, sigma)
        states = []
        for state, x0 in ((video, video_x0), (audio, audio_x0)):
            if state is not None:
                noise = torch.randn(state.latent.shape, generator=generator, dtype=state.latent.dtype)
                state = state._replace(latent=euler_ancestral_step(state, x0, sigma, sigma_next, noise))
            states.append(state)
        video, audio = states
    _close(got, (video, audio))


def test_a_captured_step_refuses_another_run():
    _, setup, video, audio = _run(True, False)
    _, other, _, _ = _run(True, False)
    sigmas = sigma_table(DISTILLED_SIGMAS)
    step = CudaGraphStep(backend=EagerReplay())
    step(setup, video, audio, sigmas[0], sigmas[1])
    with pytest.raises(ValueError, match="another run"):
        step(other, video, audio, sigmas[0], sigmas[1])


def test_auto_captures_only_a_resident_model_on_one_gpu():
    model = demo_transformer(TransformerConfig.tiny("2.0", num_layers=3))
    assert "CUDA device" in graphs_problem(model)  # the CPU: never captured
    assert use_graphs("auto", model) is False and use_graphs(False, model) is False
    with pytest.raises(ValueError, match="CUDA device; set cuda_graphs to auto or off"):
        use_graphs(True, model)
    assert graphs_problem(model, device_type="cpu") is None  # every block resident
    assert use_graphs("auto", model, device_type="cpu") is True
    assert "multi-GPU" in graphs_problem(model, one_gpu=False, device_type="cpu")
    assert use_graphs("auto", model, one_gpu=False, device_type="cpu") is False
    streamer = stream_blocks(model, "cpu", resident=1, pin=False)
    try:
        assert "resident" in graphs_problem(model, device_type="cpu")
        assert use_graphs("auto", model, device_type="cpu") is False
        with pytest.raises(ValueError, match="every block resident"):
            use_graphs(True, model, device_type="cpu")
    finally:
        streamer.remove()


def test_graph_settings_and_the_samplers_default():
    assert [graph_setting(v) for v in ("auto", "on", "off", True, False)] == ["auto", True, False, True, False]
    with pytest.raises(ValueError, match="auto, on, off"):
        graph_setting("yes")
    model = demo_transformer(TransformerConfig.tiny("2.0", num_layers=2))
    assert LocalSampler(model).cuda_graphs == "auto"  # the default, eager on the CPU without a word
    with pytest.raises(ValueError, match="CUDA device"):
        LocalSampler(model, cuda_graphs="on")


def test_a_captured_stage_takes_its_ancestral_steps_captured_too():
    """`stages.sample` wraps a stage's ancestral step in the captured step it was given (not eager any more)."""
    model = demo_transformer(TransformerConfig.tiny("2.0", num_layers=2), seed=2)
    g = torch.Generator().manual_seed(0)
    text = TextEmbeddings(torch.randn(1, 5, 12, generator=g), torch.randn(1, 5, 12, generator=g))
    stage = Stage(sigma_table(DISTILLED_SIGMAS[-4:]), noise_scale=DISTILLED_SIGMAS[-4], ancestral_seed=SEED)
    latent = empty_latent(64, 64, 9, 24.0)
    eager = sample(model, text, None, latent, stage, torch.Generator().manual_seed(4))
    captures = []

    class Counting(EagerReplay):
        def capture(self, run, warmup):
            captures.append(run)
            return super().capture(run, warmup)

    step = CudaGraphStep(backend=Counting())
    captured = sample(model, text, None, latent, stage, torch.Generator().manual_seed(4), step=step)
    torch.testing.assert_close(captured.video, eager.video, **TOL)
    torch.testing.assert_close(captured.audio, eager.audio, **TOL)
    # captured once, by a new step around the ancestral one (`around`), not by the plain step given
    assert len(captures) == 1 and step.graph is None
