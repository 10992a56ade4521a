"""The text path against the reference `ltx_core` (FeatureExtractorV1/V2 + Embeddings1DConnector +
EmbeddingsProcessor), fp32. The reference handles one prompt at a time: ours runs a left-padded batch of prompts
with different lengths and is compared prompt by prompt."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.loader.text_weights import load_prompt_encoder
from ltx2_core.model.text import TextProjection
from ltx2_core.model.text.config import TextConfig
from support.configs import TINY_GEMMA
from support.reference import import_ltx_core, reference_text_processor

HIDDEN, STATES, TOKENS = TINY_GEMMA["hidden_size"], TINY_GEMMA["num_hidden_layers"] + 1, 16
TOL = dict(atol=1e-5, rtol=1e-5)


def _randomize_(module: torch.nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    for name, param in module.named_parameters():
        noise = torch.randn(param.shape, generator=generator, dtype=torch.float32)
        # q/k norm weights near 1 as trained; the rest small enough for a meaningful attention pattern
        param.data = 1 + 0.1 * noise if name.endswith("norm.weight") else 0.2 * noise


def _left_padded(lengths: list[int]) -> torch.Tensor:
    positions = torch.arange(TOKENS)
    return torch.stack([(positions >= TOKENS - n).long() for n in lengths])


def _hidden_states(mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Per-layer offsets and scales like Gemma's; padded positions hold huge garbage that must never leak."""
    generator = torch.Generator().manual_seed(3)
    states = []
    for layer in range(STATES):
        x = torch.randn(mask.shape[0], TOKENS, HIDDEN, generator=generator) * (1 + layer) + 0.5 * layer
        states.append(torch.where(mask.bool()[..., None], x, torch.full_like(x, 1e4)))
    return tuple(states)


@pytest.mark.parametrize("token_chunk", [128, 4], ids=["one-chunk", "chunked"])
@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_batched_text_path_matches_reference_per_prompt(version, token_chunk):
    config = TextConfig.tiny(TransformerConfig.tiny(version))
    reference = reference_text_processor(config, HIDDEN, STATES)
    _randomize_(reference, seed=1)
    ours = TextProjection(config, HIDDEN, STATES)
    ours.load_state_dict(reference.state_dict(), strict=True)
    ours.feature_extractor.token_chunk = token_chunk
    mask = _left_padded([5, 13])  # not multiples of the 4 registers, and different per prompt
    hidden = _hidden_states(mask)
    got = ours(hidden, mask)
    assert got.video.shape == (2, TOKENS, config.video.width) and got.audio.shape == (2, TOKENS, config.audio.width)
    for i in range(2):
        want = reference.process_hidden_states(tuple(h[i:i + 1] for h in hidden), mask[i:i + 1], padding_side="left")
        assert bool(want.attention_mask.all())  # the DiT sees every token: padding became registers
        torch.testing.assert_close(got.video[i:i + 1], want.video_encoding, **TOL)
        torch.testing.assert_close(got.audio[i:i + 1], want.audio_encoding, **TOL)


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_prompt_encoder_matches_reference_pipeline(version, gemma_files, tiny_checkpoints):
    """Tokenizer (strip, BOS, left padding, truncation) + Gemma + text path vs the reference's LTXVGemmaTokenizer,
    one B=1 Gemma forward per prompt and EmbeddingsProcessor."""
    import_ltx_core()
    from ltx_core.text_encoders.gemma.tokenizer import LTXVGemmaTokenizer

    _, hf_folder = gemma_files
    encoder = load_prompt_encoder(hf_folder, tiny_checkpoints[version], max_length=32)
    reference = reference_text_processor(encoder.projection.config, HIDDEN, STATES)
    reference.load_state_dict(encoder.projection.state_dict(), strict=True)
    ref_tokenizer = LTXVGemmaTokenizer(str(hf_folder), max_length=32)
    prompts = ["  A cat walks along the beach at sunset.  ",
               "blurry, low quality, distorted, watermark, static, jittery motion, bad anatomy, " * 3]  # truncated
    got = encoder.encode_batch(prompts)
    for i, prompt in enumerate(prompts):
        pairs = ref_tokenizer.tokenize_with_weights(prompt.strip())["gemma"]
        ids = torch.tensor([[int(t) for t, _ in pairs]])
        mask = torch.tensor([[int(w) for _, w in pairs]])
        out = encoder.gemma(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        want = reference.process_hidden_states(out.hidden_states, mask, padding_side="left")
        torch.testing.assert_close(got.video[i:i + 1], want.video_encoding, **TOL)
        torch.testing.assert_close(got.audio[i:i + 1], want.audio_encoding, **TOL)
