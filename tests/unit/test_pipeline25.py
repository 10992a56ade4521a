"""The pipelines' defaults for LTX-2.5, read from ltx-pipelines 1.2.0: one-stage and the two-stage stage 1 take 30
steps of the LTX2 schedule with 2.3's guidance (cfg 3 / 7, STG 1 on block 28, rescale 0.7, modality 3); stage 2
refines 3 deterministic steps with the distilled LoRA (two-stage) or without (distilled); the distilled stage 1 takes
8 ancestral steps whose noise comes from seed + 10000; the negative prompt is 1.2.0's. The stages are recorded by a
sampler that returns its latent unchanged (2.5's demo models come with the other parts of issue 23)."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_decoders, demo_lora, demo_transformer, demo_upsampler
from ltx2_core.pipeline import Models, encode_request, sample_request
from ltx2_core.sampling.recipe import ANCESTRAL_SEED_OFFSET
from ltx2_core.releases import RELEASES, ModelVersion
from ltx2_core.request import DEFAULT_NEGATIVE_PROMPT, Request
from ltx2_core.sampling import DISTILLED_SIGMAS, STAGE2_SIGMAS, GuidanceParams, ltx2_sigmas, sigma_table
from ltx2_core.types import TextEmbeddings

CONFIG = TransformerConfig.tiny("2.5")
REQUEST = dict(prompt="a red car in the rain", width=128, height=64, frames=9, seed=7)


class RecordingSampler:
    """A `StageSampler` on the CPU that keeps every stage it is given and returns the latent as it came."""

    def __init__(self, config: TransformerConfig) -> None:
        self.config, self.device, self.stages = config, torch.device("cpu"), []

    def __call__(self, positive, negative, latent, stage, generator, *, progress=None):
        self.stages.append((stage, negative))
        return latent


class RecordingEncoder:
    def __init__(self) -> None:
        self.negatives = []

    def encode(self, prompt: str, negative: str | None = None):
        self.negatives.append(negative)
        text = TextEmbeddings(torch.zeros(1, 4, 16), torch.zeros(1, 4, 8))
        return text, (text if negative is not None else None)


@pytest.fixture(scope="module")
def models():
    # decoders and upsampler of another release's demo: only their latent statistics and shapes are used here
    return Models(None, RecordingEncoder(), demo_decoders("2.3"), demo_upsampler("2.3"),
                  demo_lora(demo_transformer(CONFIG), name="2.5 distilled LoRA"))


def _stages(request: Request, models: Models) -> list:
    sampler = RecordingSampler(CONFIG)
    text = TextEmbeddings(torch.zeros(1, 4, 16), torch.zeros(1, 4, 8))
    sample_request(request, models, text, text, sampler=sampler)
    return [stage for stage, _ in sampler.stages]


def _released_guidance() -> tuple[GuidanceParams, GuidanceParams]:
    """2.3's scales on the tiny model: STG on its last block (block 28 of the released 48)."""
    block = (CONFIG.num_layers - 1,)
    return (GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=block, rescale=0.7, modality=3.0),
            GuidanceParams(cfg=7.0, stg=1.0, stg_blocks=block, rescale=0.7, modality=3.0))


def test_one_stage_takes_thirty_guided_steps(models):
    (stage,) = _stages(Request(**REQUEST), models)
    assert torch.equal(stage.sigmas, ltx2_sigmas(30))  # the same fp32 host computation both times
    assert (stage.video_guidance, stage.audio_guidance) == _released_guidance()
    assert stage.ancestral_seed is None and stage.noise_scale == 1.0 and not stage.loras


def test_two_stage_refines_with_the_distilled_lora_and_deterministic_steps(models):
    first, second = _stages(Request(**REQUEST, mode="two-stage"), models)
    assert torch.equal(first.sigmas, ltx2_sigmas(30)) and first.ancestral_seed is None
    assert (first.video_guidance, first.audio_guidance) == _released_guidance()
    assert torch.equal(second.sigmas, sigma_table(STAGE2_SIGMAS)) and second.noise_scale == STAGE2_SIGMAS[0]
    assert second.loras == ((models.distilled_lora, 1.0),) and second.ancestral_seed is None
    assert second.video_guidance is None and second.audio_guidance is None


def test_distilled_stage_one_is_ancestral_from_its_own_seed(models):
    first, second = _stages(Request(**REQUEST, mode="distilled"), models)
    assert torch.equal(first.sigmas, sigma_table(DISTILLED_SIGMAS)) and first.video_guidance == GuidanceParams()
    assert first.ancestral_seed == REQUEST["seed"] + ANCESTRAL_SEED_OFFSET == 10007
    assert second.ancestral_seed is None and not second.loras  # stage 2 stays deterministic (1.2.0: too short)


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_earlier_releases_keep_the_deterministic_distilled_stage(models, version):
    sampler = RecordingSampler(TransformerConfig.tiny(version))
    text = TextEmbeddings(torch.zeros(1, 4, 16), torch.zeros(1, 4, 8))
    sample_request(Request(**REQUEST, mode="distilled"), models, text, None, sampler=sampler)
    assert [stage.ancestral_seed for stage, _ in sampler.stages] == [None, None]


def test_the_negative_prompt_is_the_release_s_unless_given():
    encoder = RecordingEncoder()
    encode_request(Request(**REQUEST), encoder, CONFIG)
    encode_request(Request(**REQUEST), encoder, TransformerConfig.tiny("2.3"))
    encode_request(Request(**REQUEST, negative_prompt="blurry"), encoder, CONFIG)
    released = RELEASES[ModelVersion.V2_5].negative_prompt
    assert encoder.negatives == [released, DEFAULT_NEGATIVE_PROMPT, "blurry"]
    assert released.startswith("has_subtitles, has_blurbox, ") and released.endswith(DEFAULT_NEGATIVE_PROMPT)
