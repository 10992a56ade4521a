"""Streamed blocks: with 0, 1 or all blocks resident the model computes what the resident model does (fp32), the
weights of a streamed block are in its device slot only while it runs, a guided step keeps zero host syncs, and the
device holds the resident tensors plus two block-sized slots."""

from __future__ import annotations

import copy

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_inputs, demo_transformer
from ltx2_core.quant.policy import quantize_blocks
from ltx2_core.memory.streaming import stream_blocks
from support.census import OpCensus


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


@pytest.mark.parametrize("resident", [0, 1, 3])
@pytest.mark.parametrize("version", ["2.0", "2.3", "2.5"])
def test_streamed_blocks_compute_what_the_resident_model_does(version, resident):
    model = demo_transformer(TransformerConfig.tiny(version))
    inputs = demo_inputs(model, text_tokens=7)
    want = model(*inputs)
    streamed = copy.deepcopy(model)
    streamer = stream_blocks(streamed, "cpu", resident=resident)
    assert len(streamer.streamed) == model.config.num_layers - resident
    # the text K/V cache is made outside the blocks' forwards, where streamed weights are not on the device
    assert streamed.cache_text_kv == (resident == model.config.num_layers)
    for _ in range(2):  # the second forward starts from the block the first one's last hook prefetched
        got = streamed(*inputs)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, atol=1e-6, rtol=0)


def test_a_streamed_block_uses_its_slot_while_it_runs_and_host_memory_otherwise():
    model = demo_transformer(TransformerConfig.tiny("2.0"))
    streamer = stream_blocks(model, "cpu", resident=1)
    seen = []
    for index, block in enumerate(streamer.streamed):
        block.register_forward_pre_hook(lambda m, a, i=index: seen.append(
            (i, m.attn1.to_q.weight.data_ptr(), {t.data_ptr() for slot in streamer.slots for t in slot})))
    model(*demo_inputs(model, text_tokens=7))
    assert [i for i, _, _ in seen] == [0, 1]
    assert all(pointer in slots for _, pointer, slots in seen)  # hooks run in order: bound to the slot by now
    at_rest = {streamer.streamed[0].attn1.to_q.weight.data_ptr()}
    assert at_rest == {streamer.blocks[0].host[streamer.blocks[0].names.index("attn1.to_q.weight")].data_ptr()}


def test_the_device_holds_resident_weights_and_two_block_slots_and_fp8_blocks_stream_as_fp8():
    model = demo_transformer(TransformerConfig.tiny("2.0"))
    blocks = model.transformer_blocks
    block_bytes = _bytes([*blocks[0].parameters(), *blocks[0].buffers()])
    total = _bytes([*model.parameters(), *model.buffers()])
    for resident in (0, 1, 3):
        streamer = stream_blocks(copy.deepcopy(model), "cpu", resident=resident)
        streamed_blocks = len(streamer.streamed)
        expected = total - streamed_blocks * block_bytes + (2 * block_bytes if streamed_blocks else 0)
        assert streamer.device_weight_bytes() == expected
    fp8 = copy.deepcopy(model)
    quantize_blocks(fp8)
    want = fp8(*demo_inputs(fp8, text_tokens=7))
    streamer = stream_blocks(fp8, "cpu", resident=0)
    assert any(t.dtype == torch.float8_e4m3fn for t in streamer.slots[0])
    for g, w in zip(fp8(*demo_inputs(fp8, text_tokens=7)), want):
        torch.testing.assert_close(g, w, atol=1e-6, rtol=0)


def test_a_streamed_forward_has_no_host_sync():
    model = demo_transformer(TransformerConfig.tiny("2.0"))
    stream_blocks(model, "cpu", resident=1)
    inputs = demo_inputs(model, text_tokens=7)
    with OpCensus() as census:
        model(*inputs)
    assert census.syncs() == {}


def test_a_lora_fused_between_runs_reaches_the_streamed_blocks_and_leaves_with_them(tmp_path):
    """The last block's hook prefetches the first streamed block for the next step; fusing a LoRA in host memory
    forgets that copy, so the next forward sees the fused weights, and the restored ones after."""
    from ltx2_core import load_lora
    from ltx2_core.loader.lora import fused_loras
    from support.model_files import write_lora

    lora = load_lora(write_lora(tmp_path / "lora.safetensors", seed=4))
    model = demo_transformer(TransformerConfig.tiny("2.0"))
    inputs = demo_inputs(model, text_tokens=7)
    with fused_loras(model, [(lora, 0.8)]):
        want_fused = model(*inputs)
    want = model(*inputs)
    stream_blocks(model, "cpu", resident=1)
    model(*inputs)  # leaves block 1's copy prefetched in its slot
    with fused_loras(model, [(lora, 0.8)]):
        fused = model(*inputs)
    after = model(*inputs)
    for got, expected in ((fused, want_fused), (after, want)):
        for g, w in zip(got, expected):
            torch.testing.assert_close(g, w, atol=1e-6, rtol=0)
    assert (fused[0] - after[0]).abs().max() > 1e-3  # the LoRA made a difference


def test_gemma_with_streamed_layers_encodes_what_the_resident_one_does(gemma_files, tiny_checkpoints):
    """Gemma's decoder layers streamed one at a time while it encodes (its embeddings on the device): the same
    embeddings; the layers' weights stay in host memory."""
    from ltx2_core.loader.text_weights import load_prompt_encoder
    from ltx2_core.memory.offload import load_streamed_prompt_encoder

    resident = load_prompt_encoder(gemma_files[0], tiny_checkpoints["2.3"], max_length=32)
    streamed = load_streamed_prompt_encoder(gemma_files[0], tiny_checkpoints["2.3"], max_length=32, device="cpu")
    streamer = streamed.gemma.block_streamer
    assert len(streamer.streamed) == len(streamed.gemma.layers)
    for _ in range(2):  # between encodings Gemma is parked: no slots, nothing on the device (issue 21)
        for got, want in zip(streamed.encode("a red car", "blurry"), resident.encode("a red car", "blurry")):
            torch.testing.assert_close(got.video, want.video, atol=1e-6, rtol=0)
            torch.testing.assert_close(got.audio, want.audio, atol=1e-6, rtol=0)
        assert streamer.parked and streamer.slots == []
