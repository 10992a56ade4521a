"""The prompt encoder end to end on a tiny Gemma 3 built in the test: one batched Gemma pass for positive and
negative, both file layouts, tokenisation rules, memory policy, and no host syncs in the text path."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.loader import gemma_files as gemma_loader
from ltx2_core.loader import text_weights
from ltx2_core.loader.text_weights import load_prompt_encoder
from ltx2_core.model.text import PromptTokenizer
from support.census import OpCensus
from support.gemma import spiece_model

MAX = 32  # padded prompt length in these tests (a multiple of the 4 tiny registers)
POSITIVE = "A red car drives through a rainy city at night, neon lights reflecting on the wet street."
NEGATIVE = "blurry, low quality"


@pytest.fixture(scope="module", params=["2.0", "2.3"])
def encoder(request, gemma_files, tiny_checkpoints):
    comfy_file, _ = gemma_files
    return load_prompt_encoder(comfy_file, tiny_checkpoints[request.param], max_length=MAX)


def _count_forwards(module: torch.nn.Module) -> list[int]:
    calls = []
    module.register_forward_hook(lambda *_: calls.append(1))
    return calls


def test_positive_and_negative_take_one_gemma_forward_and_equal_single_calls(encoder):
    calls = _count_forwards(encoder.gemma)
    positive, negative = encoder.encode(POSITIVE, NEGATIVE)
    assert len(calls) == 1
    assert positive.video.shape[0] == negative.video.shape[0] == 1
    alone_positive, none = encoder.encode(POSITIVE)
    alone_negative, _ = encoder.encode(NEGATIVE)
    assert none is None and len(calls) == 3
    for got, want in ((positive, alone_positive), (negative, alone_negative)):
        torch.testing.assert_close(got.video, want.video, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(got.audio, want.audio, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(positive.video, negative.video)


def test_comfyui_file_and_hf_folder_give_the_same_embeddings(gemma_files, tiny_checkpoints):
    comfy_file, hf_folder = gemma_files
    from_file = load_prompt_encoder(comfy_file, tiny_checkpoints["2.3"], max_length=MAX)
    from_folder = load_prompt_encoder(hf_folder, tiny_checkpoints["2.3"], max_length=MAX)
    assert from_file.tokenizer.source.endswith(".safetensors") and from_folder.tokenizer.source == str(hf_folder)
    assert torch.equal(from_file.tokenizer([POSITIVE]).input_ids, from_folder.tokenizer([POSITIVE]).input_ids)  # ids
    a, b = from_file.encode_batch([POSITIVE, NEGATIVE]), from_folder.encode_batch([POSITIVE, NEGATIVE])
    # the same weights from two files mapped at other alignments: the CPU GEMM may round differently
    torch.testing.assert_close(a.video, b.video, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a.audio, b.audio, atol=1e-5, rtol=1e-5)


def test_tokenizer_strips_adds_bos_left_pads_and_truncates():
    tokenizer = PromptTokenizer.from_sentencepiece(spiece_model(), "test", max_length=16)
    batch = tokenizer(["  a cat  ", "a cat", "the camera slowly pans across a quiet forest " * 4])
    assert torch.equal(batch.input_ids[0], batch.input_ids[1])  # stripped (token ids: integers)
    n = int(batch.attention_mask[1].sum())
    assert batch.attention_mask[1].tolist() == [0] * (16 - n) + [1] * n  # left padding
    assert batch.input_ids[1, 16 - n] == tokenizer.bos_id == 2 and (batch.input_ids[1, : 16 - n] == 0).all()
    long_ids = tokenizer.with_max_length(1024)(["the camera slowly pans across a quiet forest " * 4]).input_ids[0]
    assert batch.attention_mask[2].all() and torch.equal(batch.input_ids[2], long_ids[long_ids != 0][:16])  # ids
    with pytest.raises(TypeError, match="list of prompt strings"):
        tokenizer("a cat")


def test_text_path_has_no_host_sync(encoder):
    tokens = encoder.tokenizer([POSITIVE, NEGATIVE])
    states = tuple(encoder.gemma(**tokens._asdict(), output_hidden_states=True).hidden_states)
    with OpCensus() as census:
        encoder.projection(states, tokens.attention_mask)
    assert census.syncs() == {}
    assert census.counts.get("aten.scatter_", 0) == 2  # registers placed by scatter, not boolean indexing


def test_bf16_load_reads_only_language_model_tensors(gemma_files, tiny_checkpoints, monkeypatch):
    comfy_file, _ = gemma_files
    read = []
    original = gemma_loader.read_tensors

    def spy(file, names, **kwargs):
        read.extend(names.values())
        return original(file, names, **kwargs)

    monkeypatch.setattr(gemma_loader, "read_tensors", spy)
    encoder = load_prompt_encoder(comfy_file, tiny_checkpoints["2.0"], max_length=MAX, dtype=torch.bfloat16)
    lm_reads = [name for name in read if name != "spiece_model"]
    assert lm_reads and all(name.startswith("model.") for name in lm_reads)  # no vision_model.* / projector
    assert {p.dtype for p in encoder.gemma.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in encoder.projection.parameters()} == {torch.bfloat16}
    positive, _ = encoder.encode(POSITIVE, NEGATIVE)
    assert positive.video.dtype == torch.bfloat16 and torch.isfinite(positive.video).all()


def test_offload_moves_each_part_in_and_out_and_release_frees(gemma_files, tiny_checkpoints):
    comfy_file, _ = gemma_files
    kept = load_prompt_encoder(comfy_file, tiny_checkpoints["2.3"], max_length=MAX)
    offloaded = load_prompt_encoder(comfy_file, tiny_checkpoints["2.3"], max_length=MAX, offload_device="cpu")
    moves = []
    for name in ("gemma", "projection"):
        module = getattr(offloaded, name)
        original = module.to
        module.to = lambda device, _o=original, _n=name: (moves.append((_n, str(device))), _o(device))[1]
    got = offloaded.encode_batch([POSITIVE])
    assert moves == [("gemma", "cpu"), ("gemma", "cpu"), ("projection", "cpu"), ("projection", "cpu")]
    torch.testing.assert_close(got.video, kept.encode_batch([POSITIVE]).video, atol=1e-5, rtol=1e-5)
    offloaded.release()
    assert offloaded.gemma is None and offloaded.projection is None
    assert torch.isfinite(got.video).all()  # results outlive the weights
    with pytest.raises(RuntimeError, match="released"):
        offloaded.encode_batch([POSITIVE])


def test_prompt_length_must_fit_the_registers_before_any_weight_is_read(gemma_files, tiny_checkpoints, monkeypatch):
    comfy_file, _ = gemma_files
    monkeypatch.setattr(text_weights, "load_gemma", _must_not_load)
    with pytest.raises(ValueError, match="multiple of the connectors' 4 learnable registers"):
        load_prompt_encoder(comfy_file, tiny_checkpoints["2.0"], max_length=30)


def _must_not_load(*args, **kwargs):
    raise AssertionError("weights were read before the inputs were validated")


def test_transformers5_rope_parameters_translate_to_the_legacy_keys():
    """A folder saved by transformers 5 has only `rope_parameters`; transformers 4.x ignores that key, so it is
    translated (else the global layers would silently lose their ×8 linear RoPE scaling)."""
    from ltx2_core.model.text.gemma3 import _legacy_rope

    values = {"hidden_size": 32, "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1_000_000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0}}}
    assert _legacy_rope(values) == {"hidden_size": 32, "rope_theta": 1_000_000.0, "rope_local_base_freq": 10_000.0,
                                    "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
