"""ComfyUI's native LTX-2 CONDITIONING both ways (nodes/native_conditioning.py), without ComfyUI: native's flagged
text features (after the projection, padding trimmed) through our connectors equal our own encoding of the prompt;
our embeddings go out unflagged and come back unchanged; what our sampler cannot use is refused naming the fix."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TextEmbeddings
from ltx2_core.loader.text_weights import load_prompt_encoder
from nodes.native_conditioning import MIN_TOKENS, UNPROCESSED, from_native, to_native

PROMPT = "A cat walks along the beach at sunset while waves roll in."


@pytest.fixture(scope="module", params=["2.0", "2.3"])
def encoder(request, gemma_files, tiny_checkpoints):
    return load_prompt_encoder(gemma_files[0], tiny_checkpoints[request.param], max_length=MIN_TOKENS)


def _connectors(encoder):
    return encoder.projection.video_connector, encoder.projection.audio_connector


def _native_features(encoder, prompt: str) -> torch.Tensor:
    """What LTXAVTextEncoderLoader + CLIPTextEncode hold: the projection's output for the real tokens only (2.3:
    concat(video, audio) features; 2.0: the one feature tensor both connectors take)."""
    tokens = encoder.tokenizer([prompt])
    states = encoder.backbone.hidden_states(encoder.gemma, tokens.input_ids, tokens.attention_mask)
    video, audio = encoder.projection.feature_extractor(states, tokens.attention_mask)
    real = int(tokens.attention_mask.sum())
    features = video if video is audio else torch.cat([video, audio], dim=-1)
    return features[:, -real:]


def test_native_features_through_our_connectors_equal_our_encoding(encoder):
    features = _native_features(encoder, PROMPT)
    assert features.shape[1] < 100  # trimmed: the real tokens only
    ours = encoder.encode_batch([PROMPT])
    video_width = encoder.projection.config.video.width
    got, frame_rate = from_native([[features, {UNPROCESSED: True, "pooled_output": None}]], _connectors(encoder),
                                  video_width)
    assert frame_rate is None and got.video.shape == ours.video.shape == (1, MIN_TOKENS, video_width)
    # the same ops on the same numbers (pad features differ, but registers replace them): float32 round-off only
    torch.testing.assert_close(got.video, ours.video, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(got.audio, ours.audio, atol=1e-6, rtol=1e-6)
    other, _ = from_native([[_native_features(encoder, "blurry, low quality"), {UNPROCESSED: True}]],
                           _connectors(encoder), video_width)
    assert not torch.allclose(other.video, ours.video, atol=1e-3)


def test_our_embeddings_go_out_unflagged_and_come_back_unchanged(encoder):
    ours = encoder.encode_batch([PROMPT, "blurry"])
    native = to_native(ours, 24.0)
    assert len(native) == 1 and native[0][1] == {"pooled_output": None, "frame_rate": 24.0}
    cond = native[0][0]
    assert cond.shape == (2, MIN_TOKENS, ours.video.shape[-1] + ours.audio.shape[-1]) and cond.dtype == torch.float32
    assert UNPROCESSED not in native[0][1]
    for connectors in (_connectors(encoder), None):
        back, frame_rate = from_native(native, connectors, ours.video.shape[-1])
        assert frame_rate == 24.0
        assert torch.equal(back.video, ours.video) and torch.equal(back.audio, ours.audio)
    assert "frame_rate" not in to_native(ours)[0][1]


def test_entries_batch_in_order_flagged_or_not(encoder):
    video_width = encoder.projection.config.video.width
    ours = encoder.encode_batch([PROMPT])
    entries = [[_native_features(encoder, PROMPT), {UNPROCESSED: True, "frame_rate": 25}], *to_native(ours, 25)]
    both, frame_rate = from_native(entries, _connectors(encoder), video_width)
    assert frame_rate == 25.0 and both.video.shape[0] == 2
    torch.testing.assert_close(both.video[0], both.video[1], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(both.audio[0], both.audio[1], atol=1e-6, rtol=1e-6)


def _embeddings(tokens: int = 8) -> TextEmbeddings:
    return TextEmbeddings(torch.randn(1, tokens, 6), torch.randn(1, tokens, 4))


@pytest.mark.parametrize("options, match", [
    ({"keyframe_idxs": torch.zeros(1, 3, 4, 2)}, "LTX-2 Image Condition.*LTX-2 Video Guide"),
    ({"guide_attention_entries": [{"strength": 1.0}]}, "LTXVAddGuide"),
    ({"ref_audio": {"tokens": torch.zeros(1, 2, 128)}}, "reference-audio"),
    ({"area": (8, 8, 0, 0)}, "Set Area"),
    ({"mask": torch.ones(1, 8, 8)}, "Set Mask"),
    ({"start_percent": 0.0, "end_percent": 0.5}, "Timestep Range"),
    ({"strength": 0.5}, "strength 0.5"),
    ({"control": object()}, "LTX-2 Video Guide"),
])
def test_what_our_sampler_cannot_use_is_refused_naming_the_fix(options, match):
    native = to_native(_embeddings())
    native[0][1] |= options
    with pytest.raises(ValueError, match=match):
        from_native(native, None, 6)


def test_guides_cropped_away_are_taken():
    native = to_native(_embeddings(), 24)
    native[0][1] |= {"keyframe_idxs": None, "guide_attention_entries": None}  # what LTXVCropGuides leaves
    assert from_native(native, None, 6)[1] == 24.0


def test_bad_conditionings_are_refused(encoder):
    video_width = encoder.projection.config.video.width
    with pytest.raises(ValueError, match="CONDITIONING"):
        from_native([], None, 6)
    with pytest.raises(ValueError, match="entry 0 is not"):
        from_native([[torch.zeros(4, 6), {}]], None, 6)
    with pytest.raises(ValueError, match="different frame rates"):
        from_native(to_native(_embeddings(), 24) + to_native(_embeddings(), 25), None, 6)
    with pytest.raises(ValueError, match=r"\[8, 16\] tokens, which cannot make one batch"):
        from_native(to_native(_embeddings(8)) + to_native(_embeddings(16)), None, 6)
    wider = to_native(TextEmbeddings(torch.randn(1, 8, 6), torch.randn(1, 8, 5)))
    with pytest.raises(ValueError, match=r"\[10, 11\] wide"):
        from_native(to_native(_embeddings()) + wider, None, 6)
    with pytest.raises(ValueError, match="the LTX-2 model they belong to"):
        from_native([[torch.zeros(1, 5, 10), {UNPROCESSED: True}]], None, 6)
    wrong = torch.zeros(1, 5, video_width + 3)
    with pytest.raises(ValueError, match=f"width {video_width + 3}.*another model"):
        from_native([[wrong, {UNPROCESSED: True}]], _connectors(encoder), video_width)
    with pytest.raises(ValueError, match="connector outputs"):
        from_native([[wrong, {}]], _connectors(encoder), video_width)


def test_everything_is_checked_before_a_connector_runs(encoder):
    video_width = encoder.projection.config.video.width
    flagged = [_native_features(encoder, PROMPT), {UNPROCESSED: True}]
    late = to_native(encoder.encode_batch([PROMPT]))[0]
    late[1]["keyframe_idxs"] = torch.zeros(1, 3, 4, 2)
    calls = []
    hook = encoder.projection.video_connector.register_forward_hook(lambda *_: calls.append(1))
    try:
        with pytest.raises(ValueError, match="entry 1 carries native guide frames"):
            from_native([flagged, late], _connectors(encoder), video_width)
        assert calls == []
        from_native([flagged], _connectors(encoder), video_width)
        assert calls == [1]
    finally:
        hook.remove()
