"""LTX-2.5's text path against ltx-core 1.2.0 (`ref120/gemma4.py`) on the tiny Gemma 4 text encoder file and the tiny
2.5 transformer file (the released layouts, `support.gemma4`), fp32: token ids and masks (a pure copy, exact), every
Gemma 4 hidden state, and the video/audio contexts after the projection and the connectors, for a batch of prompts
that Gemma sees in one forward on both sides. Tolerance atol=rtol=1e-5 as for 2.0/2.3; measured max |Δ| is in
docs/ltx25/text.md."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.loader.gemma_files import find_gemma
from ltx2_core.loader.text_weights import load_prompt_encoder
from support.gemma4 import FILE_NAME, TOKENIZER_CONFIG, padded_tokenizer_json, sources25, write_gemma4_file, \
    write_transformer25_file
from support.reference120 import run_reference

TOL = dict(atol=1e-5, rtol=1e-5)
MAX = 32  # padded prompt length (a multiple of the tiny connectors' 4 registers; longer than the sliding window 6)
PROMPTS = ["  A cat walks along the beach at sunset while waves roll in.  ", "blurry, low quality",
           "The camera slowly pans across a quiet forest; birds sing and leaves rustle. " * 3]  # truncated
_NO_PAD = {k: v for k, v in TOKENIZER_CONFIG.items() if k != "pad_token"}
# tokenizer files 1.2.0 reads differently: the flags replace the post-processor (BOS then not added twice), no pad
# token (pads are EOS), the pad token from tokenizer.json's padding section
TOKENIZER_VARIANTS = {"add_bos": ({**TOKENIZER_CONFIG, "add_bos_token": True, "add_eos_token": False}, None),
                      "no_pad": (_NO_PAD, None), "json_pad": (_NO_PAD, padded_tokenizer_json())}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ltx25_text")
    variants = {name: write_gemma4_file(folder / f"{name}.safetensors", tokenizer_config=config, tokenizer=tokenizer)
                for name, (config, tokenizer) in TOKENIZER_VARIANTS.items()}
    return folder, write_gemma4_file(folder / FILE_NAME), write_transformer25_file(folder / "transformer.safetensors"), \
        variants


def test_gemma4_text_path_matches_ltx_core_120(files):
    folder, text_encoder, transformer, variants = files
    settings = {"max_length": MAX, "registers": 4, "prompts": PROMPTS, "text_encoder": str(text_encoder),
                "transformer": str(transformer), "tokenizers": {k: str(v) for k, v in variants.items()}}
    want = run_reference("gemma4.py", {"unused": torch.zeros(1)}, settings, tmp_path=folder)

    encoder = load_prompt_encoder(text_encoder, sources25(text_encoder, transformer), max_length=MAX)
    tokens = encoder.tokenizer(PROMPTS)
    for i in range(len(PROMPTS)):
        assert torch.equal(tokens.input_ids[i], want[f"ids.{i}"])  # token ids
        assert torch.equal(tokens.attention_mask[i], want[f"mask.{i}"].to(torch.int64))
    assert tokens.attention_mask[2].all() and not tokens.attention_mask[1].all()  # one truncated, one padded
    for name, path in variants.items():
        variant = find_gemma(path).tokenizer(MAX)(PROMPTS)
        for i in range(len(PROMPTS)):
            assert torch.equal(variant.input_ids[i], want[f"{name}.ids.{i}"]), (name, i)  # token ids
            assert torch.equal(variant.attention_mask[i], want[f"{name}.mask.{i}"]), (name, i)

    hidden = encoder.backbone.hidden_states(encoder.gemma, tokens.input_ids, tokens.attention_mask)
    assert len(hidden) == 8
    for i in range(len(PROMPTS)):
        for layer, h in enumerate(hidden):
            torch.testing.assert_close(h[i], want[f"hidden.{i}.{layer}"], **TOL)
    got = encoder.encode_batch(PROMPTS)  # one Gemma forward for all prompts, as 1.2.0's encode
    for i in range(len(PROMPTS)):
        torch.testing.assert_close(got.video[i], want[f"video.{i}"], **TOL)
        torch.testing.assert_close(got.audio[i], want[f"audio.{i}"], **TOL)
    assert not torch.allclose(got.video[0], got.video[1])

