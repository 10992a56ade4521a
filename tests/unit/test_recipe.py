"""A stage built from its parts by the release's rules (`sampling.recipe.build_stage`), the one place the pipeline
and the sampler nodes build their stages: the schedule, the held sound's guidance and CFG contexts, ancestral or
Euler steps, and which audio a refinement returns, per release (1.0.0's rules for 2.0 and 2.3, 1.2.0's for 2.5)."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.conditioning import EncodedAudio, EncodedControl, EncodedImage, EncodedKeyframe, EncodedVideo
from ltx2_core.releases import RELEASES
from ltx2_core.sampling import DISTILLED_SIGMAS, STAGE2_SIGMAS, GuidanceParams, ltx2_sigmas, sigma_table
from ltx2_core.sampling.recipe import ANCESTRAL_SEED_OFFSET, StageParts, build_stage, guided
from ltx2_core.types import TextEmbeddings

POSITIVE = TextEmbeddings(torch.zeros(1, 2, 4), torch.zeros(1, 2, 3))
NEGATIVE = TextEmbeddings(torch.ones(1, 2, 4), torch.ones(1, 2, 3))
GUIDED = GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(0,), rescale=0.7, modality=3.0)
SOUND = EncodedAudio(torch.zeros(1, 8, 3, 16), 1.0)
VERSIONS = ("2.0", "2.3", "2.5")


def _build(version: str, **parts):
    return build_stage(version, StageParts(**parts), POSITIVE, NEGATIVE)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_schedules(version):
    stage = _build(version, steps=4).stage
    assert torch.equal(stage.sigmas, ltx2_sigmas(4)) and stage.noise_scale == 1.0  # the same host computation
    default = _build(version).stage
    assert len(default.sigmas) - 1 == RELEASES[version].steps
    refine = _build(version, schedule="stage-2 refine").stage
    assert torch.equal(refine.sigmas, sigma_table(STAGE2_SIGMAS)) and refine.noise_scale == STAGE2_SIGMAS[0]
    explicit = _build(version, schedule="distilled", sigmas=(0.6, 0.2, 0.0)).stage
    assert explicit.noise_scale == 0.6 and explicit.ancestral_seed is None  # explicit sigmas: plain Euler
    with pytest.raises(ValueError, match="schedule must be one of"):
        _build(version, schedule="karras")


@pytest.mark.parametrize("version", VERSIONS)
def test_distilled_steps_are_ancestral_where_the_release_is_except_for_euler_pipelines(version):
    ancestral = RELEASES[version].ancestral_distilled
    stage = _build(version, schedule="distilled", seed=3).stage
    assert torch.equal(stage.sigmas, sigma_table(DISTILLED_SIGMAS))
    assert stage.ancestral_seed == (3 + ANCESTRAL_SEED_OFFSET if ancestral else None)
    image = EncodedImage(torch.zeros(1, 128, 1, 2, 2), 0, 1.0)
    assert (_build(version, schedule="distilled", conditions=[image]).stage.ancestral_seed is not None) == ancestral
    control = EncodedControl(torch.zeros(1, 128, 1, 2, 2), 1.0)  # ICLoraPipeline: Euler
    video = EncodedVideo(torch.zeros(1, 128, 1, 2, 2), 1.0)  # RetakePipeline (sound for a video, retake): Euler
    for condition in (control, video):
        assert _build(version, schedule="distilled", conditions=[image, condition]).stage.ancestral_seed is None


@pytest.mark.parametrize("version", VERSIONS)
def test_a_held_sound_is_not_guided_and_the_uncond_pass_keeps_its_positive_audio_context(version):
    held = _build(version, video_guidance=GUIDED, audio_guidance=GUIDED, conditions=[SOUND])
    assert held.stage.audio_guidance == GuidanceParams() and held.stage.video_guidance == GUIDED
    assert held.negative.video is NEGATIVE.video and held.negative.audio is POSITIVE.audio
    weaker = _build(version, audio_guidance=GUIDED, conditions=[SOUND._replace(strength=0.5)])
    assert weaker.stage.audio_guidance == GUIDED and weaker.negative is NEGATIVE  # sampled and guided: as given
    kept = _build(version, audio_guidance=GUIDED, conditions=[SOUND._replace(retake=True)])  # a retake's own sound
    assert kept.stage.audio_guidance == GUIDED and kept.negative is NEGATIVE  # RetakePipeline keeps its guiders


@pytest.mark.parametrize("version", VERSIONS)
def test_a_refinement_after_a_guided_stage_keeps_its_audio_where_the_release_does(version):
    keeps = RELEASES[version].two_stage_keeps_stage1_audio
    assert keeps == (version == "2.5")  # 1.2.0's TI2VidTwoStagesPipeline; 1.0.0 returns stage 2's
    assert _build(version, schedule="stage-2 refine", after_guided=True).stage.keep_audio == keeps
    assert not _build(version, schedule="stage-2 refine", after_guided=False).stage.keep_audio  # distilled, IC-LoRA
    assert not _build(version, after_guided=True).stage.keep_audio  # from noise: nothing to keep
    keyframe = EncodedKeyframe(torch.zeros(1, 128, 1, 2, 2), 0, 1.0)  # KeyframeInterpolationPipeline: stage 2's
    assert not _build(version, schedule="stage-2 refine", after_guided=True, conditions=[keyframe]).stage.keep_audio


def test_guided_is_any_pass_beyond_the_conditional_one():
    assert not guided(_build("2.5").stage)
    assert guided(_build("2.5", video_guidance=GUIDED).stage)
    assert guided(_build("2.5", audio_guidance=GuidanceParams(cfg=2.0)).stage)
    assert not guided(_build("2.5", video_guidance=GuidanceParams(stg_blocks=(1,))).stage)  # scales all neutral


def test_a_callers_own_ancestral_choice_is_kept():
    """LTX-2 SamplerCustomAdvanced passes ComfyUI's euler_ancestral choice and its seed; explicit sigmas never take
    the release's distilled rule."""
    stage = _build("2.3", sigmas=(1.0, 0.5, 0.0), seed=4, ancestral_seed=5).stage
    assert stage.ancestral_seed == 5 and stage.noise_scale == 1.0
    assert _build("2.5", sigmas=(1.0, 0.5, 0.0), seed=4).stage.ancestral_seed is None
