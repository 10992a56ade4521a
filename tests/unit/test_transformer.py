"""Behaviour of our transformer that the reference does not cover: shapes, batching rules and host syncs."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.model.transformer import BatchPerturbations
from ltx2_core.types import PassPerturbation, StreamInput
from ltx2_core.demo import demo_inputs, demo_transformer
from ltx2_core.model.transformer import rope as rope_module
from support.census import OpCensus


@pytest.mark.parametrize("version", ["2.0", "2.3", "2.5"])
def test_output_shapes_and_dtype(version):
    model = demo_transformer(TransformerConfig.tiny(version))
    video, audio, run = demo_inputs(model, pixel_frames=17, height=64, width=96)
    v, a = model(video, audio, run)
    assert v.shape == (1, 3 * 2 * 3, 128) and a.shape == (1, 18, 128)
    assert v.dtype == video.latent.dtype and torch.isfinite(v).all() and torch.isfinite(a).all()


@pytest.mark.parametrize("version", ["2.0", "2.3", "2.5"])
def test_forward_with_mixed_guidance_batch_has_no_host_sync(version, monkeypatch):
    """One batched forward of [cond, uncond, STG, isolated]: 0 device->host reads, and RoPE is not rebuilt."""
    model = demo_transformer(TransformerConfig.tiny(version))
    video, audio, run = demo_inputs(model)
    batch = lambda t: t.expand(4, *t.shape[1:])  # noqa: E731
    video = StreamInput(*(batch(t) for t in video))
    audio = StreamInput(*(batch(t) for t in audio))
    run = run._replace(video_context=batch(run.video_context), audio_context=batch(run.audio_context))
    passes = [PassPerturbation(), PassPerturbation(), PassPerturbation.stg([1], [1]), PassPerturbation.isolated()]
    pert = BatchPerturbations(passes, model.config.num_layers, "cpu", torch.float32)

    def no_rope(*args, **kwargs):
        raise AssertionError("RoPE tables must come from RunConstants, not be rebuilt in forward")

    monkeypatch.setattr(rope_module, "rope_tables", no_rope)
    with OpCensus() as census:
        model(video, audio, run, pert)
    assert census.syncs() == {}
    # no dtype/device copies either: per-run tensors (masks, tables) are already where the forward needs them
    assert census.counts.get("aten._to_copy", 0) == 0, census.counts


def test_perturbation_blocks_are_validated():
    with pytest.raises(ValueError, match="skip_video_self_attn=.*outside 0..2"):
        BatchPerturbations([PassPerturbation.stg([5])], 3, "cpu", torch.float32)


def test_demo_inputs_reject_bad_sizes():
    model = demo_transformer()
    with pytest.raises(ValueError, match="8k\\+1"):
        demo_inputs(model, pixel_frames=16)


@pytest.mark.parametrize("version", ["2.0", "2.3", "2.5"])
def test_text_keys_and_values_are_computed_once_per_run_where_they_do_not_change(version):
    """The text K/V of LTX-2.0 depend only on the prompt, those of 2.5 on the prompt and the blocks' static prompt
    tables: prepare_run computes them once and no forward projects the context again, with the same output as
    projecting it every step. 2.3 modulates them by sigma: never cached."""
    model = demo_transformer(TransformerConfig.tiny(version))
    cached_kv = version != "2.3"
    assert model.config.static_text_kv == cached_kv
    video, audio, run = demo_inputs(model, text_tokens=7)
    assert (run.text_kv is not None) == cached_kv
    calls = []
    hooks = [block.attn2.to_k.register_forward_hook(lambda *_: calls.append(1)) for block in model.transformer_blocks]
    cached = model(video, audio, run)
    for hook in hooks:
        hook.remove()
    assert len(calls) == (0 if cached_kv else model.config.num_layers)
    uncached = model(video, audio, run._replace(text_kv=None))
    for got, want in zip(cached, uncached):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    if cached_kv:  # a batch's share of the cache is the share of the contexts
        first = run.batch(slice(0, 1))
        assert first.text_kv[0][0].shape[0] == 1 and first.video_context.shape[0] == 1
