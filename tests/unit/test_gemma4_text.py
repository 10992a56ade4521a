"""LTX-2.5's prompt encoder on the tiny Gemma 4 text encoder and 2.5 transformer files (`support.gemma4`): one batched
Gemma forward for positive and negative, Gemma 4's layers streamed like Gemma 3's, only the language model's tensors
read, the tokenizer's BOS rule, the connector keys 1.2.0 added, and no host syncs after Gemma."""

from __future__ import annotations

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from ltx2_core import TransformerConfig
from ltx2_core.loader import gemma_files
from ltx2_core.loader.gemma_files import find_gemma
from ltx2_core.loader.text_weights import load_prompt_encoder
from ltx2_core.memory.offload import load_streamed_prompt_encoder
from ltx2_core.model.text import PromptTokenizer
from ltx2_core.model.text.config import TextConfig
from ltx2_core.model.text.connector import EmbeddingsConnector
from ltx2_core.model.text.gemma4 import Gemma4TextModel
from support.census import OpCensus
from support.gemma4 import FILE_NAME, TOKENIZER_CONFIG, sources25, tokenizer_json, write_gemma4_file, \
    write_transformer25_file

MAX = 32
POSITIVE = "A red car drives through a rainy city at night, neon lights reflecting on the wet street."
NEGATIVE = "blurry, low quality"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ltx25_text")
    return write_gemma4_file(folder / FILE_NAME), write_transformer25_file(folder / "transformer.safetensors")


@pytest.fixture(scope="module")
def encoder(files):
    text_encoder, transformer = files
    return load_prompt_encoder(text_encoder, sources25(text_encoder, transformer), max_length=MAX)


def test_positive_and_negative_take_one_gemma_forward_and_equal_single_calls(encoder):
    assert isinstance(encoder.gemma, Gemma4TextModel) and encoder.backbone.name == "Gemma 4"
    calls = []
    handle = encoder.gemma.register_forward_hook(lambda *_: calls.append(1))
    try:
        positive, negative = encoder.encode(POSITIVE, NEGATIVE)
        assert len(calls) == 1 and positive.video.shape == (1, MAX, 16) and positive.audio.shape == (1, MAX, 8)
        alone_positive, _ = encoder.encode(POSITIVE)
        alone_negative, _ = encoder.encode(NEGATIVE)
    finally:
        handle.remove()
    for got, want in ((positive, alone_positive), (negative, alone_negative)):
        torch.testing.assert_close(got.video, want.video, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(got.audio, want.audio, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(positive.video, negative.video)


def test_streamed_gemma4_layers_encode_what_the_resident_ones_do(files, encoder):
    """Sliding and full-attention layers differ in shape: each shape streams through its own two slots."""
    text_encoder, transformer = files
    streamed = load_streamed_prompt_encoder(text_encoder, sources25(text_encoder, transformer), max_length=MAX,
                                            device="cpu")
    streamer = streamed.gemma.block_streamer
    assert len(streamer.streamed) == len(streamed.gemma.layers) == 7
    assert sorted(set(streamer.kind_of)) == [0, 1]  # two shapes of layers
    for _ in range(2):  # parked between encodings
        for got, want in zip(streamed.encode(POSITIVE, NEGATIVE), encoder.encode(POSITIVE, NEGATIVE)):
            torch.testing.assert_close(got.video, want.video, atol=1e-6, rtol=0)
            torch.testing.assert_close(got.audio, want.audio, atol=1e-6, rtol=0)
        assert streamer.parked and streamer.slots == []


def test_the_plans_gemma4_slots_are_the_streamers(files):
    """The memory plan counts, from the header, one layer of each shape (sliding, full attention) for the two slots
    each shape streams through: what the streamer holds on the device."""
    from ltx2_core.memory.sizes import gemma_bytes

    text_encoder, transformer = files
    rest, slot_layer, layers = gemma_bytes(text_encoder, torch.float32)
    streamed = load_streamed_prompt_encoder(text_encoder, sources25(text_encoder, transformer), max_length=MAX,
                                            device="cpu")
    streamer = streamed.gemma.block_streamer
    streamer.unpark()
    try:
        slots = sum(t.numel() * t.element_size() for slot in streamer.slots for t in slot)
    finally:
        streamer.park()
    one = {kind: next(i for i, k in enumerate(streamer.kind_of) if k == kind) for kind in set(streamer.kind_of)}
    layer_bytes = [sum(t.numel() * t.element_size() for t in (*layer.parameters(), *layer.buffers()))
                   for layer in streamed.gemma.layers]  # the buffers: each layer's layer_scalar
    assert slots == 2 * slot_layer == 2 * sum(layer_bytes[i] for i in one.values())  # byte counts: exact
    assert layers == sum(layer_bytes) and len(one) == 2


def test_only_language_model_tensors_are_read_in_bf16(files, monkeypatch):
    text_encoder, transformer = files
    read = []
    original = gemma_files.read_tensors

    def spy(file, names, **kwargs):
        read.extend(names.values())
        return original(file, names, **kwargs)

    monkeypatch.setattr(gemma_files, "read_tensors", spy)
    encoder = load_prompt_encoder(text_encoder, sources25(text_encoder, transformer), max_length=MAX,
                                  dtype=torch.bfloat16)
    lm_reads = [name for name in read if not name.startswith(("tokenizer_json", "hf_asset__"))]
    assert lm_reads and all(name.startswith("model.") for name in lm_reads)  # no vision_model.* / projector
    assert any(name.endswith("layer_scalar") for name in lm_reads)
    assert {p.dtype for p in encoder.gemma.parameters()} == {torch.bfloat16}
    positive, _ = encoder.encode(POSITIVE, NEGATIVE)
    assert positive.video.dtype == torch.bfloat16 and torch.isfinite(positive.video).all()


def test_a_stray_ltx_tensor_under_model_is_not_a_language_model_key(tmp_path):
    path = write_gemma4_file(tmp_path / FILE_NAME)
    with safe_open(str(path), "pt") as f:
        metadata = f.metadata()
    tensors = load_file(str(path)) | {"model.diffusion_model.video_embeddings_connector.x": torch.zeros(2)}
    save_file(tensors, str(path), metadata=metadata)
    source = find_gemma(path)
    (_, keys), = source.shards
    assert source.layout == "lightricks" and not any("diffusion_model" in k for k in keys.values())


def test_bos_is_added_only_when_the_tokenizer_did_not():
    plain = PromptTokenizer.from_tokenizer_json(tokenizer_json(), TOKENIZER_CONFIG, "test", max_length=16)
    with_bos = PromptTokenizer.from_tokenizer_json(tokenizer_json(), {**TOKENIZER_CONFIG, "add_bos_token": True},
                                                   "test", max_length=16)
    a, b = plain(["  a cat walks  "]), with_bos(["a cat walks"])
    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.attention_mask, b.attention_mask)  # token ids
    n = int(a.attention_mask[0].sum())
    assert a.input_ids[0, 16 - n] == 2 and (a.input_ids[0, : 16 - n] == 0).all() and a.input_ids[0, -1] != 1
    no_pad = PromptTokenizer.from_tokenizer_json(
        tokenizer_json(), {k: v for k, v in TOKENIZER_CONFIG.items() if k != "pad_token"}, "test", max_length=16)
    assert no_pad.pad_id == 1  # EOS pads, as 1.2.0


def test_connector_keys_of_ltx_core_120():
    section = TransformerConfig.tiny("2.5").to_metadata() | TextConfig.tiny(TransformerConfig.tiny("2.5")).to_metadata()
    section.pop("rope_type")
    assert TextConfig.from_metadata(section, "2.5.0").video.rope_type == "split"  # 1.2.0's default
    assert TextConfig.from_metadata(section, "2.3.0").video.rope_type == "interleaved"  # 1.0.0's, unchanged
    config = TextConfig.from_metadata(section | {"connector_ff_bias": False}, "2.5.0")
    assert not config.video.ff_bias and not config.audio.ff_bias
    assert config.to_metadata()["connector_ff_bias"] is False
    block = EmbeddingsConnector(config.video).transformer_1d_blocks[0]
    assert block.ff.net[0].proj.bias is None and block.ff.net[2].bias is None


def test_text_path_after_gemma4_has_no_host_sync(encoder):
    tokens = encoder.tokenizer([POSITIVE, NEGATIVE])
    with OpCensus() as census:
        states = encoder.backbone.hidden_states(encoder.gemma, tokens.input_ids, tokens.attention_mask)
        encoder.projection(states, tokens.attention_mask)
    assert census.syncs() == {}


@pytest.mark.parametrize("version", ["2.3", "2.5"])
def test_the_demo_encodes_2_5_prompts_with_gemma4(version):
    from ltx2_core.demo import demo_prompt_encoder

    encoder = demo_prompt_encoder(TransformerConfig.tiny(version))
    assert encoder.backbone.name == ("Gemma 4" if version == "2.5" else "Gemma 3")
    positive, negative = encoder.encode(POSITIVE, NEGATIVE)
    assert positive.video.shape == (1, 128, 16) and torch.isfinite(positive.video).all()
    assert not torch.allclose(positive.video, negative.video)
