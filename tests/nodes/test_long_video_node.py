"""LTX2GenerateLong: a clip longer than one window, with its sound, as the core's generate_long makes it (the
windows hold each other's video and audio; tests/unit/test_long_video.py measures the seams); bad input refused
naming the fix before any model work."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import Models, Request, Windows, frames_for, generate_long
from support.node_calls import node

COMMON = dict(negative_prompt="blurry", mode="one-stage", width=64, height=64, fps=24.0, seed=2, steps=2)


def test_the_node_makes_what_generate_long_makes(loaded):
    model, encoder, _, _ = loaded
    images, audio, fps = node("LTX2GenerateLong", model, encoder, "a train passes", duration=2.0, window=25,
                              overlap=8, window_prompts="a train arrives\n\na train leaves", **COMMON)
    frames = frames_for(2.0, 24.0)
    assert frames == 49 and images.shape == (frames, 64, 64, 3) and fps == 24.0
    assert audio["waveform"].shape[:2] == (1, 2)
    assert audio["waveform"].shape[-1] == pytest.approx(frames / 24.0 * audio["sample_rate"], abs=0.05 *
                                                        audio["sample_rate"])
    request = Request("a train passes", "blurry", 64, 64, frames, 24.0, 2, 2, "one-stage",
                      windows=Windows(25, 8, ("a train arrives", "a train leaves")))
    models = Models(model.host.transformer, encoder, model.decoders, video_encoder=model.video_encoder)
    want = generate_long(request, models)
    torch.testing.assert_close(images, want.frames, atol=1e-5, rtol=0)
    torch.testing.assert_close(audio["waveform"][0], want.waveform.float(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("settings, match", [
    (dict(window=25, overlap=24), "must be below the window"),
    (dict(window=25, overlap=12), "a multiple of 8"),
    (dict(window=24, overlap=8), r"8k\+1 ≥ 17"),
    (dict(window=25, overlap=8, window_prompts="   \n"), "the prompt is empty"),
    (dict(window=25, overlap=8, width=96, mode="distilled"), "multiples of 64"),
])
def test_bad_windows_are_refused_before_model_work(loaded, settings, match, monkeypatch):
    import nodes.long_video as long_video

    def no_model_work(*args, **kwargs):
        raise AssertionError("sampled a bad request")

    monkeypatch.setattr(long_video, "generate_long", no_model_work)
    model, encoder, _, _ = loaded
    args = COMMON | dict(duration=3.0) | settings
    prompt = "" if "window_prompts" in settings else "a train"
    with pytest.raises(ValueError, match=match):
        node("LTX2GenerateLong", model, encoder, prompt, **args)
