"""A DFR request's checks before any model work (`ltx2_core.dfr.check_dfr`) and the sampler's backstop: the rounds,
the temporal upsampler file they need, a transformer without the keyframe embedding (the reference's refusal), the
frame count; and the canvas a good request gets."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.conditioning.keyframe_slots import KeyframeSlots
from ltx2_core.demo import demo_transformer
from ltx2_core.dfr import check_dfr
from ltx2_core.sampling import STAGE2_SIGMAS, sigma_table
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import empty_latent, sample
from ltx2_core.types import TextEmbeddings

KEYFRAMES = dataclasses.replace(TransformerConfig.tiny("2.5"), keyframe_embedding=True)


def test_a_good_request_gets_its_canvas():
    assert check_dfr(113, 1, KEYFRAMES, "t.safetensors", "temporal.safetensors") == (121, 24, [24, 48, 72, 96, 120])
    assert check_dfr(49, 0, KEYFRAMES, "t.safetensors", None)[0] == 49  # no rounds: no temporal file needed


@pytest.mark.parametrize("frames, rounds, config, temporal, message", [
    (49, 3, KEYFRAMES, "t", "must be 0, 1 or 2"),
    (49, True, KEYFRAMES, "t", "must be 0, 1 or 2"),
    (49, 1, KEYFRAMES, None, "--temporal-upsampler"),
    (49, 0, TransformerConfig.tiny("2.5"), None, "does not set 'use_keyframes_abs_pos_embedding'"),
    (50, 0, KEYFRAMES, None, "8k\\+1"),
    (1, 0, KEYFRAMES, None, "8k\\+1"),
])
def test_bad_requests_are_refused_naming_the_fix(frames, rounds, config, temporal, message):
    with pytest.raises(ValueError, match=message):
        check_dfr(frames, rounds, config, "ltx-2.5-22b-dev-transformer-bf16.safetensors", temporal)


def test_the_sampler_refuses_slots_on_a_transformer_without_the_embedding():
    model = demo_transformer(TransformerConfig.tiny("2.5"))
    stage = Stage(sigma_table(STAGE2_SIGMAS), name="stage 1", conditions=[KeyframeSlots((8,))])
    text = TextEmbeddings(torch.zeros(1, 7, 16), torch.zeros(1, 7, 8))
    with pytest.raises(ValueError, match="stage 'stage 1' does not set 'use_keyframes_abs_pos_embedding'"):
        sample(model, text, None, empty_latent(96, 64, 17, 24.0), stage, torch.Generator())
