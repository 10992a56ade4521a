"""Prompt enhancement against ltx-pipelines 1.2.0 (`ref120/enhance.py`: its `generate_enhanced_prompt` through
`LTXGemmaTextEncoder._enhance` and `model.generate`), fp32 on the CPU, `max_new_tokens` patched small on both sides:

* Gemma 3 (the tiny chat folder of `support.gemma_chat`): seeds 7 and 8, sampled: the padded prompt ids and the
  generated ids equal exactly (integer ids: the same model class, inputs and draws give the same tokens), the two
  seeds' ids differ (the seed is used), the cleaned texts equal;
* Gemma 4 (the tiny LTX-2.5 file of `support.gemma4`, a chat template added): greedy with no repeated 5-gram, ids
  equal exactly.
The system prompt is what our side reads from the installed ltx-core (1.0.0 in the test environment), sent to the
reference so both use the same text.
"""

from __future__ import annotations

import functools

import contextlib

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ltx2_core.loader.gemma_files import find_gemma, load_gemma
from ltx2_core.loader.vision_weights import load_vision_tower
from ltx2_core.model.text import enhance
from support.gemma4 import write_gemma4_file
from support.gemma_chat import GEMMA3_CHAT_TEMPLATE, write_chat_folder, write_vision_weights
from support.reference120 import run_reference

PROMPT = "A cat walks along the beach at sunset"
MAX_NEW = 16


class _Encoder:
    """What enhance_prompt reads of a PromptEncoder (the language model alone: no projection needed)."""

    def __init__(self, path):
        source = find_gemma(path)
        self.tokenizer, self.backbone = source.tokenizer(), source.backbone
        self.gemma = load_gemma(source, dtype=torch.float32)
        self.device = torch.device("cpu")

    def _visiting(self, module):
        return contextlib.nullcontext()


def _text(tensor: torch.Tensor) -> str:
    return bytes(tensor.tolist()).decode()


def _reference(tmp_path, family: str, gemma, seeds, system: str):
    settings = {"gemma": str(gemma), "family": family, "max_new_tokens": MAX_NEW, "seeds": seeds, "prompt": PROMPT,
                "system_prompt": system}
    return run_reference("enhance.py", {"unused": torch.zeros(1)}, settings, tmp_path=tmp_path)


def test_gemma3_enhancement_ids_match_ltx_pipelines_120(tmp_path):
    folder = write_chat_folder(tmp_path / "gemma3")
    system = enhance.system_prompt("gemma3", image=False)
    want = _reference(tmp_path, "gemma3", folder, [7, 8], system)
    encoder = _Encoder(folder)
    ids, _ = enhance.chat_ids(encoder.tokenizer.chat, enhance.messages(PROMPT, system), encoder.tokenizer.pad_id)
    assert torch.equal(ids[0], want["prompt_ids.7"])  # token ids: exact
    got = {seed: enhance.enhance_prompt(encoder, PROMPT, seed=seed, max_new_tokens=MAX_NEW) for seed in (7, 8)}
    for seed, result in got.items():
        assert result.token_ids == want[f"ids.{seed}"].tolist(), seed  # integer ids: exact
        assert result.text == _text(want[f"text.{seed}"])
    assert got[7].token_ids != got[8].token_ids
    assert len(got[7].token_ids) == MAX_NEW or got[7].token_ids[-1] in encoder.tokenizer.chat.eos_ids


def _gemma4_with_template(path):
    write_gemma4_file(path)
    with safe_open(str(path), "pt") as f:
        metadata = f.metadata()
    tensors = load_file(str(path))
    tensors["hf_asset__chat_template.jinja"] = torch.frombuffer(bytearray(GEMMA3_CHAT_TEMPLATE.encode()),
                                                                dtype=torch.uint8)
    save_file(tensors, str(path), metadata=metadata)
    return path


def test_gemma4_enhancement_ids_match_ltx_pipelines_120(tmp_path):
    path = _gemma4_with_template(tmp_path / "gemma4.safetensors")
    system = enhance.system_prompt("gemma4", image=False)
    want = _reference(tmp_path, "gemma4", path, [3], system)
    encoder = _Encoder(path)
    assert encoder.tokenizer.chat.template == GEMMA3_CHAT_TEMPLATE
    result = enhance.enhance_prompt(encoder, PROMPT, seed=3, max_new_tokens=MAX_NEW)
    assert result.token_ids == want["ids.3"].tolist()  # integer ids: exact (greedy)
    assert result.text == _text(want["text.3"])
    assert enhance.enhance_prompt(encoder, PROMPT, seed=4, max_new_tokens=MAX_NEW).token_ids == result.token_ids


@pytest.mark.parametrize("image", [False, True])
def test_our_gemma_turns_equal_transformers_chat_template(tmp_path, image):
    from transformers import AutoTokenizer

    from ltx2_core.model.text.chat import gemma_turns

    tokenizer = AutoTokenizer.from_pretrained(str(write_chat_folder(tmp_path / "g")), local_files_only=True)
    chat = enhance.messages("  a dog runs  ", "Describe the scene.\n", image=image)
    assert gemma_turns(chat, tokenizer.bos_token) == tokenizer.apply_chat_template(chat, tokenize=False,
                                                                                  add_generation_prompt=True)
    plain = find_gemma(write_chat_folder(tmp_path / "plain", template=False)).tokenizer().chat
    templated = find_gemma(tmp_path / "g").tokenizer().chat
    assert plain.template is None and templated.template is not None
    assert plain.encode(plain.render(chat)) == templated.encode(templated.render(chat))


def test_gemma3_image_to_video_enhancement_matches_ltx_pipelines_120(tmp_path):
    """The i2v chat with a 40x30 picture: the reference's resize (long side 896) and Gemma 3's processor, the
    vision tower from the folder's own weights, the image features in place of the image tokens; sampled ids equal
    exactly."""
    import numpy as np
    from PIL import Image

    from ltx2_core.model.text.vision import VisionSettings, pixel_values, resized_image

    folder = write_chat_folder(tmp_path / "gemma3")
    write_vision_weights(folder)
    picture = np.random.default_rng(0).integers(0, 256, (30, 40, 3), dtype=np.uint8)
    Image.fromarray(picture).save(tmp_path / "picture.png")
    system = enhance.system_prompt("gemma3", image=True)
    settings = {"gemma": str(folder), "family": "gemma3", "max_new_tokens": MAX_NEW, "seeds": [5], "prompt": PROMPT,
                "system_prompt": system, "image": str(tmp_path / "picture.png")}
    want = run_reference("enhance.py", {"unused": torch.zeros(1)}, settings, tmp_path=tmp_path)
    encoder = _Encoder(folder)
    encoder.gemma_source = find_gemma(folder)
    encoder.load_vision = functools.partial(load_vision_tower, encoder.gemma_source)
    torch.testing.assert_close(pixel_values(resized_image(picture), VisionSettings.of(encoder.gemma_source)),
                               want["pixels.5"], atol=0, rtol=0)  # the same ops on the same uint8 image
    result = enhance.enhance_prompt(encoder, PROMPT, seed=5, image=picture, max_new_tokens=MAX_NEW)
    assert result.token_ids == want["ids.5"].tolist()  # integer ids: exact
    assert result.text == _text(want["text.5"])
    plain = enhance.enhance_prompt(encoder, PROMPT, seed=5, max_new_tokens=MAX_NEW)
    assert plain.token_ids != result.token_ids  # the image is seen
