"""LTX-2.5's duration head through the nodes, on the tiny release (its head, a file of its own beside the
transformer in models/diffusion_models, predicts about 0.9 s: 17 frames at 24 fps): LTX-2 Predict Length's frames
for a modular graph, LTX-2 Generate's `length` auto for text to audio and video, and the refusals naming the fix."""

from __future__ import annotations

import shutil

import pytest

from nodes.duration import LTX2PredictLength
from nodes.generate import LTX2Generate
from support.node_calls import node
from support.release25 import write_release25

AUTO = {"length": "auto", "min_seconds": 0.3, "max_seconds": 2.0}
SETTINGS = dict(negative_prompt="noise", mode="one-stage", width=64, height=64, frames=121, fps=24.0, seed=3, steps=1)


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return {field: str(path) for field, path in write_release25(tmp_path_factory.mktemp("models")).items()}


@pytest.fixture(scope="module")
def loaded(release):
    (model,) = node("LTX2ModelLoader", release["dev"], release["conv_vae"], release["audio_vae"], "auto", "cpu")
    (encoder,) = node("LTX2TextEncoderLoader", release["text_encoder"], model, "cpu", False)
    return model, encoder


def test_the_loader_finds_the_head_beside_the_transformer_and_predict_length_gives_frames(release, loaded):
    model, encoder = loaded
    assert model.duration_head is not None and model.files.duration_head == release["duration_head"]
    conditioning = node("LTX2TextEncode", encoder, "rain drums on a tin roof", "noise")[0]
    for audio_only in (False, True):
        frames, seconds = node("LTX2PredictLength", model, conditioning, 24.0, 0.3, 2.0, audio_only)
        assert frames == 17 and 0.8 < seconds < 1.0  # 0.9 s · 24 = 21.6 -> 17 on the 8k+1 grid
    frames, _ = node("LTX2PredictLength", model, conditioning, 24.0, 1.0, 2.0, False)
    assert frames == 25  # clamped up to 1 s: 24 frames, snapped up to 25
    assert "above max_seconds" in LTX2PredictLength.VALIDATE_INPUTS(fps=24.0, min_seconds=3.0, max_seconds=2.0)


@pytest.mark.parametrize("audio_only", [True, False])
def test_the_generate_node_takes_the_predicted_length(loaded, audio_only):
    model, encoder = loaded
    images, audio, fps = node("LTX2Generate", model, encoder, "rain drums on a tin roof", **SETTINGS,
                              audio_only=audio_only, **AUTO)
    waveform = audio["waveform"]
    assert abs(waveform.shape[2] / audio["sample_rate"] - 17 / 24) < 0.05  # not the frames input's 121
    assert images is None if audio_only else images.shape[0] == 17


def test_a_model_without_the_head_is_refused_naming_the_fix(release, loaded, tmp_path):
    _, encoder = loaded
    alone = shutil.copy(release["dev"], tmp_path / "ltx-2.5-22b-dev-transformer-bf16.safetensors")
    (bare,) = node("LTX2ModelLoader", str(alone), release["conv_vae"], release["audio_vae"], "auto", "cpu")
    assert bare.duration_head is None
    with pytest.raises(ValueError, match="in ComfyUI a duration head file in models/diffusion_models"):
        node("LTX2Generate", bare, encoder, "rain", **SETTINGS, audio_only=True, **AUTO)
    conditioning = node("LTX2TextEncode", encoder, "rain", "noise")[0]
    with pytest.raises(ValueError, match="the model's files have no duration head"):
        node("LTX2PredictLength", bare, conditioning, 24.0, 1.0, 20.0, False)
    assert "above max_seconds" in LTX2Generate.VALIDATE_INPUTS(min_seconds=3.0, max_seconds=2.0)
    assert list(LTX2Generate.INPUT_TYPES()["optional"])[-3:] == ["length", "min_seconds", "max_seconds"]  # last


def test_the_frames_input_is_not_checked_when_the_length_is_auto():
    assert "8k+1" in LTX2Generate.VALIDATE_INPUTS(mode="one-stage", width=64, height=64, frames=10, fps=24.0)
    assert LTX2Generate.VALIDATE_INPUTS(mode="one-stage", width=64, height=64, frames=10, fps=24.0,
                                        length="auto") is True
