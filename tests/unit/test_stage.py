"""The Stage record: one value per sampling stage, built by the pipeline and taken whole by any `StageSampler`
(a toy one plugs in here), moved to the CPU whatever its conditions hold, and refused by `stages.sample` when it
carries LoRAs that only a sampler owning the weights can fuse."""

from __future__ import annotations

import dataclasses
import pickle
from typing import NamedTuple

import pytest
import torch

from ltx2_core import pipeline
from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.pipeline import Models, Request, sample_request
from ltx2_core.sampling import STAGE2_SIGMAS, GuidanceParams, Stage, ltx2_sigmas, sigma_table
from ltx2_core.stages import AVLatent, sample


class _Held(NamedTuple):
    latent: torch.Tensor
    frame: int


@dataclasses.dataclass(frozen=True)
class _Window:
    mask: torch.Tensor
    start: int


class _Recorder:
    """A StageSampler that samples nothing: it keeps each stage it is given and returns the latent."""

    def __init__(self) -> None:
        self.config, self.device, self.stages = TransformerConfig.tiny(), torch.device("cpu"), []

    def __call__(self, positive, negative, latent: AVLatent, stage: Stage, generator, *, progress=None) -> AVLatent:
        self.stages.append((stage, negative))
        return latent


def test_a_stage_holds_tuples_and_moves_every_tensor_of_its_conditions_to_the_cpu():
    held, window = _Held(torch.ones(1, 128, 1, 2, 2), 8), _Window(torch.zeros(3), 2)
    stage = Stage(ltx2_sigmas(2), "stage 1", loras=[("a.safetensors", 0.5)], conditions=[held, (window,)])
    assert stage.loras == (("a.safetensors", 0.5),) and isinstance(stage.conditions, tuple)
    moved = pickle.loads(pickle.dumps(stage.cpu()))  # what a StageJob carries to the workers
    assert isinstance(moved.conditions[0], _Held) and moved.conditions[0].frame == 8
    assert torch.equal(moved.conditions[0].latent, held.latent)
    assert isinstance(moved.conditions[1][0], _Window) and moved.conditions[1][0].start == 2
    assert torch.equal(moved.sigmas, stage.sigmas) and moved.name == "stage 1"


def test_the_ancestral_eta_travels_with_the_stage_and_is_checked():
    stage = Stage(ltx2_sigmas(2), ancestral_seed=3, ancestral_eta=0.5)
    assert Stage(ltx2_sigmas(2)).ancestral_eta == 1.0  # the distilled stage 1's fully ancestral step
    assert pickle.loads(pickle.dumps(stage.cpu())).ancestral_eta == 0.5  # what a StageJob carries to the workers
    with pytest.raises(ValueError, match=r"ancestral_eta must lie in \[0, 1\]"):
        Stage(ltx2_sigmas(2), ancestral_eta=1.5)


def test_a_toy_sampler_gets_each_stage_of_a_two_stage_request(monkeypatch):
    monkeypatch.setattr(pipeline, "upsample", lambda latent, upsampler, decoders: latent)
    lora = object()
    models = Models(None, None, None, upsampler=object(), distilled_lora=lora)
    sampler = _Recorder()
    request = Request("a red car", width=128, height=64, frames=9, steps=3, mode="two-stage")
    sample_request(request, models, "positive", "negative", sampler=sampler)
    (first, negative), (second, refine_negative) = sampler.stages
    assert first.name == "stage 1" and torch.equal(first.sigmas, ltx2_sigmas(3)) and first.noise_scale == 1.0
    assert first.video_guidance.cfg > 1 and first.loras == () and negative == "negative"
    assert second.name == "stage 2" and torch.equal(second.sigmas, sigma_table(STAGE2_SIGMAS))
    assert second.noise_scale == STAGE2_SIGMAS[0] and second.loras == ((lora, 1.0),) and refine_negative is None
    assert second.video_guidance is None and second.conditions == ()


def test_stages_sample_refuses_loras_it_cannot_fuse():
    stage = Stage(ltx2_sigmas(2), "refine", video_guidance=GuidanceParams(), loras=((object(), 1.0),))
    with pytest.raises(ValueError, match="refine: stages.sample does not fuse LoRAs"):
        sample(None, None, None, None, stage, torch.Generator())


@pytest.mark.parametrize("version, keeps", [("2.3", False), ("2.5", True)])
def test_an_hq_request_samples_res2s_stages_with_the_lora_in_both(monkeypatch, version, keeps):
    """two-stage-hq (`TI2VidTwoStagesHQPipeline`): stage 1 on the LTX2 schedule shifted by its own latent's tokens,
    the HQ guidance (cfg and modality, no STG), the distilled LoRA at 0.25; stage 2 the refinement with it at 0.5;
    res_2s in both; the audio returned as the release's two-stage pipeline returns it."""
    from ltx2_core.geometry import video_tokens
    from ltx2_core.releases import HQ_PRESET

    monkeypatch.setattr(pipeline, "upsample", lambda latent, upsampler, decoders: latent)
    lora = object()
    models = Models(None, None, None, upsampler=object(), distilled_lora=lora)
    sampler = _Recorder()
    sampler.config = TransformerConfig.tiny(version)
    request = Request("a red car", width=128, height=64, frames=9, mode="two-stage-hq")
    sample_request(request, models, "positive", "negative", sampler=sampler)
    (first, negative), (second, _) = sampler.stages
    tokens = video_tokens(9, 32, 64)
    assert torch.equal(first.sigmas, ltx2_sigmas(HQ_PRESET.steps, tokens)) and not torch.equal(
        first.sigmas, ltx2_sigmas(HQ_PRESET.steps))
    assert first.sampler == second.sampler == "res_2s" and first.ancestral_seed is None
    assert first.loras == ((lora, 0.25),) and second.loras == ((lora, 0.5),) and negative == "negative"
    assert first.video_guidance == GuidanceParams(cfg=3.0, stg=0.0, rescale=0.45, modality=3.0)
    assert first.audio_guidance == GuidanceParams(cfg=7.0, stg=0.0, rescale=1.0, modality=3.0)
    assert torch.equal(second.sigmas, sigma_table(STAGE2_SIGMAS)) and second.keep_audio is keeps
    moved = pickle.loads(pickle.dumps(dataclasses.replace(first, loras=()).cpu()))  # what a StageJob carries
    assert moved.sampler == "res_2s"


def test_res2s_is_refused_where_it_cannot_run():
    from ltx2_core.errors import SettingError
    from ltx2_core.sampling.cache import CacheSettings

    with pytest.raises(ValueError, match="pick euler_ancestral or res_2s"):
        Stage(ltx2_sigmas(2), sampler="res_2s", ancestral_seed=3)
    with pytest.raises(ValueError, match="run it without the cache"):
        Stage(ltx2_sigmas(2), sampler="res_2s", cache=CacheSettings())
    with pytest.raises(ValueError, match="sampler must be one of euler, res_2s"):
        Stage(ltx2_sigmas(2), sampler="heun")
    with pytest.raises(SettingError, match="set sampler to euler"):
        Request("a red car", mode="distilled", sampler="res_2s").check()
    with pytest.raises(SettingError, match="run it without the cache"):
        Request("a red car", mode="two-stage-hq", cache=CacheSettings()).check()
    Request("a red car", mode="two-stage-hq", cache=CacheSettings(), sampler="euler").check()


def test_res2s_steps_run_eagerly_where_graphs_are_auto_and_a_captured_step_is_refused():
    """CUDA graphs are not captured for res_2s (two predictions per step and a final one): `auto` samples it
    eagerly (`LocalSampler`), a captured step is refused naming the fix."""
    from ltx2_core.compile import CudaGraphStep, EagerReplay
    from ltx2_core.demo import demo_transformer
    from ltx2_core.pipeline import LocalSampler
    from ltx2_core.stages import empty_latent
    from ltx2_core.types import TextEmbeddings

    model = demo_transformer(TransformerConfig.tiny("2.3"), seed=4)
    g = torch.Generator().manual_seed(0)
    cfg = model.config
    prompt = TextEmbeddings(torch.randn(1, 5, cfg.video.context_dim, generator=g),
                            torch.randn(1, 5, cfg.audio.context_dim, generator=g))
    latent = empty_latent(64, 64, 9, 24.0)
    stage = Stage(ltx2_sigmas(2), sampler="res_2s")
    steps = []
    out = LocalSampler(model, cuda_graphs="auto")(prompt, None, latent, stage, torch.Generator().manual_seed(1),
                                                  progress=lambda done, total: steps.append((done, total)))
    assert torch.isfinite(out.video).all() and steps[-1] == (3, 3) == (stage.loop_steps, stage.loop_steps)
    with pytest.raises(ValueError, match="set cuda_graphs to auto"):
        sample(model, prompt, None, latent, stage, torch.Generator(), step=CudaGraphStep(backend=EagerReplay()))
