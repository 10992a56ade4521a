"""The conditioning seam: a condition kind defined here (audio tokens held at given values) plugs in through the
registry line alone and is applied by `stages.sample` like the image kind; a stream no condition touches keeps no
mask; the attention function takes an optional mask and passes it to SDPA."""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest
import torch
import torch.nn.functional as F

from ltx2_core import TransformerConfig
from ltx2_core.conditioning import (
    AUDIO,
    CONDITIONS,
    ConditionedStream,
    EncodedImage,
    condition_audio,
    condition_video,
)
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_positions, patchify_audio, video_positions
from ltx2_core.model.transformer.attention import Attention, sdpa
from ltx2_core.sampling import ltx2_sigmas
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import empty_latent, sample
from ltx2_core.types import TextEmbeddings


class HeldAudio(NamedTuple):
    """A toy kind: the first audio tokens held exactly at `clean` (1, n, 128)."""

    clean: torch.Tensor
    modality = AUDIO

    def apply(self, stream: ConditionedStream) -> ConditionedStream:
        return stream.hold(0, self.clean.to(device=stream.clean.device, dtype=stream.clean.dtype), 0.0)


class AttendingAudio(NamedTuple):
    """A toy kind that sets attention weights on the audio stream (the transformer takes them for the video only)."""

    modality = AUDIO

    def apply(self, stream: ConditionedStream) -> ConditionedStream:
        tokens = stream.clean.shape[1]
        return stream._replace(attention=torch.full((1, tokens, tokens), 0.5))


@pytest.fixture(scope="module")
def model():
    return demo_transformer(TransformerConfig.tiny("2.0"))


def _run(model, conditions):
    g = torch.Generator().manual_seed(0)
    config = model.config
    widths = (config.caption_channels or config.video.context_dim, config.caption_channels or config.audio.context_dim)
    text = TextEmbeddings(*(torch.randn(1, 7, w, generator=g) for w in widths))
    return sample(model, text, None, empty_latent(96, 64, 17, 24.0), Stage(ltx2_sigmas(3), conditions=conditions),
                  torch.Generator().manual_seed(3))


def test_a_new_kind_plugs_in_through_the_registry_line_and_holds_its_tokens(model, monkeypatch):
    held = torch.randn(1, 4, 128)
    with pytest.raises(TypeError, match="not a registered condition kind .known: image"):
        _run(model, [HeldAudio(held)])
    monkeypatch.setitem(CONDITIONS, "held audio", HeldAudio)  # the registry line
    out = _run(model, [HeldAudio(held)])
    free = _run(model, [])
    tokens = patchify_audio(out.audio)
    assert torch.equal(tokens[:, :4], held)  # mask 0: kept exactly, as a frame-0 image at strength 1
    assert (tokens[:, 4:] - patchify_audio(free.audio)[:, 4:]).abs().max() > 1e-3  # and it steers the rest
    assert out.video.shape == free.video.shape and out.audio.shape == free.audio.shape


def test_each_stream_takes_only_its_conditions_and_untouched_ones_keep_no_mask(monkeypatch):
    monkeypatch.setitem(CONDITIONS, "held audio", HeldAudio)
    image, held = EncodedImage(torch.randn(1, 128, 1, 2, 3), 0, 1.0), HeldAudio(torch.randn(1, 2, 128))
    video_clean, audio_clean = torch.zeros(1, 3 * 2 * 3, 128), torch.zeros(1, 9, 128)
    video = condition_video(video_clean, video_positions(3, 2, 3, 24.0), [image, held], 24.0)
    audio = condition_audio(audio_clean, audio_positions(9), [image], 24.0)
    assert audio.mask is None and audio.attention is None and audio.clean is audio_clean and audio.tokens == 9
    assert video.mask is not None and torch.equal(video.mask[0, :6, 0], torch.zeros(6))
    audio = condition_audio(audio_clean, audio_positions(9), [image, held], 24.0)
    assert torch.equal(audio.mask[0, :, 0], torch.tensor([0.0] * 2 + [1.0] * 7))


def test_guiding_tokens_grow_the_attention_weights_and_the_sampler_refuses_audio_weights(model, monkeypatch):
    """Unweighted tokens appended to weighted ones: the weights kept, the new group 1 within itself and to and from
    the latent's own tokens; none appended without weights: no weights."""
    stream = ConditionedStream.start(AUDIO, torch.zeros(1, 3, 128), audio_positions(3), 24.0)
    assert stream.append(torch.ones(1, 2, 128), torch.ones(1, 2, 1), audio_positions(2)).attention is None
    stream = stream._replace(attention=torch.eye(3)[None])
    grown = stream.append(torch.ones(1, 2, 128), torch.ones(1, 2, 1), audio_positions(2))
    assert grown.attention.shape == (1, 5, 5) and grown.tokens == 3 and grown.clean.shape[1] == 5
    assert torch.equal(grown.attention[0, :3, :3], torch.eye(3))
    assert grown.attention[0, 3:].eq(1).all() and grown.attention[0, :, 3:].eq(1).all()
    monkeypatch.setitem(CONDITIONS, "attending audio", AttendingAudio)
    with pytest.raises(ValueError, match="attention weights, which the transformer takes for the video"):
        _run(model, [AttendingAudio()])


def _qkv(batch=2, q_tokens=5, k_tokens=7, heads=3, head_dim=8):
    g = torch.Generator().manual_seed(1)
    return (torch.randn(batch, q_tokens, heads, head_dim, generator=g),
            *(torch.randn(batch, k_tokens, heads, head_dim, generator=g) for _ in range(2)))


def test_attend_with_a_mask_is_sdpa_with_that_mask_and_without_one_is_unchanged():
    q, k, v = _qkv()
    mask = torch.rand(2, 1, 5, 7, generator=torch.Generator().manual_seed(2)) < 0.5
    mask[..., 0] = True  # every query attends to some key
    # the written-out softmax: fp32 round-off of a different summation order, far below any real difference
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    written = torch.einsum("bhqk,bkhd->bqhd", weights, v)
    torch.testing.assert_close(sdpa(q, k, v, mask), written, atol=1e-6, rtol=1e-5)
    today = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    assert torch.equal(sdpa(q, k, v), today)  # no mask: the same call as before the seam, bit for bit
    assert torch.equal(sdpa(q, k, v, None), today)


def test_the_attention_module_hands_its_mask_to_the_swapped_function():
    torch.manual_seed(0)
    attn = Attention(16, 16, heads=2, head_dim=8, gated=True, rope_type="interleaved", eps=1e-6)
    for p in attn.parameters():
        torch.nn.init.normal_(p, std=0.2)
    x = torch.randn(1, 4, 16)
    seen = []

    def recording(q, k, v, mask=None):
        seen.append(mask)
        return sdpa(q, k, v, mask)

    want = attn(x)
    attn.attend = recording  # as parallel passes swap it
    mask = torch.eye(4, dtype=torch.bool)[None, None]
    assert torch.equal(attn(x), want) and seen == [None]
    only_self = attn(x, mask=mask)  # each token attends to itself alone: the output is its own value, gated
    assert seen[-1] is mask
    gates = 2.0 * torch.sigmoid(attn.to_gate_logits(x))
    values = attn.to_v(x).unflatten(-1, (2, 8)) * gates.unsqueeze(-1)
    torch.testing.assert_close(only_self, attn.to_out[0](values.flatten(-2)), atol=1e-6, rtol=1e-5)
