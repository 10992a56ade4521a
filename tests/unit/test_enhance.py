"""Prompt enhancement's pieces (model.text.enhance / chat): clean_response, the padding to 8, the n-gram rule, the
system prompt's sources and refusals."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.model.text import enhance
from ltx2_core.model.text.chat import ChatCodec, gemma_turns, split_special


@pytest.mark.parametrize("raw, clean", [
    ("\u201cA cat\u201d \u2014 walks", "A cat\" - walks"),
    ("  1. **The scene:** it\u2019s 5\u2032 tall", "The scene:** it's 5' tall"),
    ("\u00a0\u2212\u2013", " --"),  # no letter: all kept
    ("", ""),
])
def test_clean_response(raw, clean):
    assert enhance.clean_response(raw) == clean


def test_chat_ids_left_pad_to_a_multiple_of_8():
    codec = ChatCodec(render=lambda m: "x" * len(m[1]["content"]), encode=lambda t: [5] * len(t), decode=str)
    for length in (1, 8, 9):
        ids, mask = enhance.chat_ids(codec, [{"role": "system", "content": ""}, {"role": "user", "content": "a" *
                                                                                  length}], pad_id=0)
        assert ids.shape[1] % 8 == 0 and mask.sum() == length and mask[0, -1] == 1
        assert torch.equal(ids[0, :ids.shape[1] - length], torch.zeros(ids.shape[1] - length, dtype=torch.int64))


def test_no_repeat_ngram_bans_what_would_repeat():
    assert enhance._banned([1, 2, 3, 4, 9, 1, 2, 3], 4) == [4]
    assert enhance._banned([1, 2, 3], 5) == []
    greedy = enhance.GEMMA4_DECODING._replace(no_repeat_ngram=2)
    logits = torch.tensor([[0.0, 5.0, 4.0]])
    assert enhance.next_token(logits, [1, 1], greedy, None).item() == 2  # 1 after 1 would repeat (1, 1)


def test_split_special_and_turns():
    specials = {"<bos>": 2, "<start_of_turn>": 9}
    assert split_special("<bos>ab<start_of_turn>c", specials, lambda t: [ord(ch) for ch in t]) == [2, 97, 98, 9, 99]
    text = gemma_turns(enhance.messages("hi ", "SYS"), "<bos>")
    assert text == "<bos><start_of_turn>user\nSYS\n\nuser prompt: hi<end_of_turn>\n<start_of_turn>model\n"


def test_system_prompt_sources(tmp_path, monkeypatch):
    own = tmp_path / "mine.txt"
    own.write_text("Be brief.")
    assert enhance.system_prompt("gemma3", False, own) == "Be brief."
    with pytest.raises(ValueError, match="does not exist"):
        enhance.system_prompt("gemma3", False, tmp_path / "missing.txt")
    monkeypatch.setattr(enhance, "_PROMPTS_PACKAGE", "no_such_package_ltx")
    with pytest.raises(ValueError, match="ltx-core==1.0.0.*--system-prompt"):
        enhance.system_prompt("gemma3", True)


def test_the_memory_plan_counts_enhancement_in_the_text_stage():
    from ltx2_core.memory.sizes import SideBytes, enhance_activation_bytes
    from ltx2_core.model.text.gemma3 import GEMMA3_12B_TEXT

    kv = 48 * 2 * 8 * 256 * (2048 + 600) * 2  # Gemma 3 12B's KV cache for the chat and 600 new tokens, bf16
    extra = enhance_activation_bytes(GEMMA3_12B_TEXT, torch.bfloat16)
    assert kv < extra < kv + 400_000_000
    side = SideBytes(gemma_rest=100, gemma_layer=10, projection=50, encode_activations=5)
    assert side._replace(enhance_activations=extra).encoding == 120 + extra
    assert side.encoding == 125  # unchanged without enhancement


def test_the_memory_plan_counts_the_vision_tower_with_an_image():
    from ltx2_core.memory.sizes import enhance_activation_bytes, vision_tower_bytes
    from ltx2_core.model.text.gemma3 import GEMMA3_12B_TEXT

    tower = vision_tower_bytes(torch.bfloat16)
    assert 800_000_000 < tower < 2_000_000_000  # SigLIP so400m in bf16 (~0.83 GB) with its activations
    assert enhance_activation_bytes(GEMMA3_12B_TEXT, torch.bfloat16, image=True) == \
        enhance_activation_bytes(GEMMA3_12B_TEXT, torch.bfloat16) + tower


def test_the_command_line_refuses_before_loading(tmp_path, capsys):
    from ltx2_core.__main__ import main

    assert main(["--system-prompt", str(tmp_path / "s.txt"), "--output", str(tmp_path / "a.mp4")]) == 2
    assert "--system-prompt goes with --enhance-prompt" in capsys.readouterr().err
    assert main(["--enhance-prompt", "--system-prompt", str(tmp_path / "s.txt"),
                 "--output", str(tmp_path / "a.mp4")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_the_vision_tower_leaves_nothing_on_meta(tmp_path):
    from ltx2_core.loader.gemma_files import find_gemma
    from ltx2_core.loader.vision_weights import load_vision_tower
    from support.gemma_chat import write_chat_folder, write_vision_weights

    folder = write_vision_weights(write_chat_folder(tmp_path / "g"))
    tower = load_vision_tower(find_gemma(folder), 32, "cpu", torch.float32)
    assert not [n for n, t in (*tower.named_parameters(), *tower.named_buffers()) if t.is_meta]
    first = tower(torch.rand(1, 3, 28, 28, generator=torch.Generator().manual_seed(0)))
    assert first.shape == (1, 4, 32) and torch.isfinite(first).all()
