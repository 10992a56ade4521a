"""LTX-2 Text Encode with prompt enhancement: the enhanced text in the node's UI and as its prompt output, encoded in
place of the given prompt; the refusals that come before Gemma runs (no system prompt, an image on Gemma 4)."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.demo.text import demo_prompt_encoder
from ltx2_core.model.text import enhance
from nodes.text import LTX2TextEncode


@pytest.fixture
def system_file(tmp_path):
    path = tmp_path / "system.txt"
    path.write_text("Rewrite the idea as one detailed paragraph.")
    return path


def test_the_enhanced_prompt_is_shown_given_and_encoded(system_file, monkeypatch):
    monkeypatch.setattr(enhance, "GEMMA3_DECODING", enhance.GEMMA3_DECODING._replace(max_new_tokens=12))
    encoder = demo_prompt_encoder()
    out = LTX2TextEncode().encode(encoder, "a cat on a beach", "blurry", enhance_prompt=True, seed=4,
                                  system_prompt=str(system_file))
    (shown,) = out["ui"]["text"]
    conditioning, _, _, prompt = out["result"]
    assert prompt == shown and prompt != "a cat on a beach"
    assert prompt == enhance.enhance_prompt(encoder, "a cat on a beach", seed=4, system_prompt_file=system_file,
                                            max_new_tokens=12).text  # seeded: the same text again
    want, _ = encoder.encode(prompt, "blurry")
    torch.testing.assert_close(conditioning.positive.video, want.video, atol=0, rtol=0)  # same inputs, same ops
    plain = LTX2TextEncode().encode(encoder, "a cat on a beach", "blurry")
    assert plain["ui"]["text"] == ["a cat on a beach"] and plain["result"][3] == "a cat on a beach"


def test_refusals_come_before_gemma_runs(tmp_path, monkeypatch):
    encoder = demo_prompt_encoder()
    with pytest.raises(ValueError, match="does not exist"):
        LTX2TextEncode().encode(encoder, "a cat", "", enhance_prompt=True, system_prompt=str(tmp_path / "none.txt"))
    monkeypatch.setattr(enhance, "_PROMPTS_PACKAGE", "no_such_package_ltx")
    with pytest.raises(ValueError, match="ltx-core==1.0.0"):
        LTX2TextEncode().encode(encoder, "a cat", "", enhance_prompt=True)


def test_gemma4_refuses_an_image(system_file):
    encoder = demo_prompt_encoder(TransformerConfig.tiny("2.5"))
    image = torch.rand(1, 32, 48, 3)
    with pytest.raises(ValueError, match="Gemma 4 enhances prompts from the text alone"):
        LTX2TextEncode().encode(encoder, "a cat", "", enhance_prompt=True, image=image, system_prompt=str(system_file))
