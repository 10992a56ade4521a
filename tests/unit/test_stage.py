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
