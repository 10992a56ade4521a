"""The keyframes mode (Lightricks' `KeyframeInterpolationPipeline`): two-stage with every image appended as a keyframe
in both stages and stage 2's audio returned; refused, naming the fix, with fewer than two images, without the
two-stage models, with a clip of one stage or windows. The parity with the reference's `__call__` is in
tests/parity/test_pipelines120_parity.py and test_pipelines100_parity.py."""

from __future__ import annotations

import numpy as np
import pytest

from ltx2_core.conditioning import EncodedKeyframe, ImageCondition
from ltx2_core.demo import demo_models
from ltx2_core.errors import SettingError
from ltx2_core.pipeline import LocalSampler, Request, generate
from ltx2_core.request import Given, check_settings, check_stage_models
from ltx2_core.windows import Windows

SMALL = dict(prompt="a red car in the rain", width=128, height=64, frames=17, steps=2)
PIXELS = np.random.default_rng(0).integers(0, 256, (64, 128, 3), dtype=np.uint8)
TWO = (ImageCondition(PIXELS, 0, 1.0, 0), ImageCondition(PIXELS, 16, 0.5, 0))


def test_fewer_than_two_images_are_refused_naming_the_fix():
    with pytest.raises(SettingError, match="at least two images.*mode two-stage for one image"):
        Request(**SMALL, mode="keyframes", images=TWO[:1]).check()
    with pytest.raises(SettingError, match="at least two images"):  # when queued: no images linked
        check_settings("keyframes", 128, 64, 17, 24.0, given=Given())
    check_settings("keyframes", 128, 64, 17, 24.0, given=Given(images=True))
    Request(**SMALL, mode="keyframes", images=TWO).check()


def test_the_two_stage_models_sizes_and_one_window_are_required():
    with pytest.raises(SettingError, match="keyframes pipeline needs the distilled LoRA"):
        check_stage_models("keyframes", upsampler=True, distilled_lora=False)
    with pytest.raises(SettingError, match="keyframes pipeline needs the x2 spatial latent upsampler"):
        check_stage_models("keyframes", upsampler=False, distilled_lora=True)
    with pytest.raises(SettingError, match="multiples of 64"):
        check_settings("keyframes", 96, 64, 17, 24.0, given=Given(images=True))
    with pytest.raises(SettingError, match="runs one stage .* not keyframes"):
        check_settings("keyframes", 128, 64, 17, 24.0, given=Given(images=True, video_input=True))
    with pytest.raises(SettingError, match="keyframe interpolation samples one window"):
        Request(**{**SMALL, "frames": 33}, mode="keyframes", images=TWO, windows=Windows(window=17, overlap=8)).check()
    Request(**SMALL, mode="keyframes", images=TWO, windows=Windows(window=17, overlap=8)).check()  # one window
    with pytest.raises(ValueError, match="two-stage and distilled upscale"):  # text to audio runs one stage
        Request(**SMALL, mode="keyframes", audio_only=True).check()


class _Recorder:
    def __init__(self, sampler):
        self.sampler, self.config, self.device, self.stages = sampler, sampler.config, sampler.device, []

    def __call__(self, positive, negative, latent, stage, *args, **kwargs):
        self.stages.append(stage)
        return self.sampler(positive, negative, latent, stage, *args, **kwargs)


@pytest.mark.parametrize("version", ["2.0", "2.5"])
def test_both_stages_append_every_image_and_stage_two_returns_its_audio(version):
    models = demo_models(version)
    recorder = _Recorder(LocalSampler(models.transformer))
    out = generate(Request(**SMALL, mode="keyframes", images=TWO, seed=3), models, sampler=recorder)
    assert [stage.name for stage in recorder.stages] == ["stage 1", "stage 2"]
    for stage in recorder.stages:
        assert [(type(c), c.frame) for c in stage.conditions] == [(EncodedKeyframe, 0), (EncodedKeyframe, 16)]
    assert recorder.stages[1].loras and not recorder.stages[1].keep_audio  # the distilled LoRA; stage 2's audio
    assert out.frames.shape == (17, 64, 128, 3)


def test_the_memory_plan_counts_every_keyframes_appended_tokens():
    from ltx2_core import TransformerConfig
    from ltx2_core.pipeline import request_job

    config = TransformerConfig.tiny("2.0")
    one_latent_frame = 2 * 4  # 64x128 at the last (full) size: 2 x 4 tokens
    keyframes = request_job(Request(**SMALL, mode="keyframes", images=TWO), config)
    two_stage = request_job(Request(**SMALL, mode="two-stage", images=TWO), config)
    assert keyframes.guide_tokens == 2 * one_latent_frame  # frame 0 appended too
    assert two_stage.guide_tokens == one_latent_frame  # frame 0 replaces the first latent frame
