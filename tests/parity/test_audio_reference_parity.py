"""Dub-It's audio reference tokens (`ltx2_core.conditioning.audio_reference`) against ltx-pipelines 1.2.0's
`patchify_dubit_audio_reference_latent` + ltx-core's `AudioConditionByReferenceLatent.apply_to` on a toy audio state
(tests/parity/ref120/audio_reference.py): the appended values, the denoise mask, the (negative) positions and no
attention mask; the reference's state starts the appended tokens at zeros, which our noising does too
(`stages.noised_stream`)."""

from __future__ import annotations

import pytest
import torch
from support.reference120 import run_reference

from ltx2_core.conditioning import AUDIO, ConditionedStream, EncodedAudioReference, apply_conditions
from ltx2_core.geometry import audio_positions, patchify_audio

CLIP_FRAMES, REFERENCE_FRAMES = 18, 26  # audio latents: the clip's (17 frames at 24 fps) and a 1 s sound's
STRENGTHS = (1.0, 0.75)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    g = torch.Generator().manual_seed(11)
    tensors = {"clip": torch.randn(1, 8, CLIP_FRAMES, 16, generator=g),
               "reference": torch.randn(1, 8, REFERENCE_FRAMES, 16, generator=g)}
    out = run_reference("audio_reference.py", tensors, {"strengths": list(STRENGTHS)},
                        tmp_path_factory.mktemp("audio_reference"))
    return tensors, out


@pytest.mark.parametrize("strength", STRENGTHS)
def test_the_reference_tokens_equal_1_2_0s(reference, strength):
    tensors, ref = reference
    name = f"s{strength}"
    own = patchify_audio(tensors["clip"])
    stream = apply_conditions(ConditionedStream.start(AUDIO, own, audio_positions(CLIP_FRAMES), 24.0),
                              [EncodedAudioReference(tensors["reference"], strength)])
    assert stream.tokens == CLIP_FRAMES and stream.clean.shape[1] == CLIP_FRAMES + REFERENCE_FRAMES
    # pure copies of the given latents (no arithmetic), so exact
    assert torch.equal(stream.clean, ref[f"{name}.clean"])
    assert torch.equal(ref[f"{name}.latent"][:, CLIP_FRAMES:], torch.zeros_like(ref[f"{name}.latent"][:, CLIP_FRAMES:]))
    torch.testing.assert_close(stream.denoise_mask(), ref[f"{name}.mask"].float(), atol=0, rtol=0)
    torch.testing.assert_close(stream.positions, ref[f"{name}.positions"], atol=1e-6, rtol=0)
    assert float(stream.positions[:, :, CLIP_FRAMES:].max()) < 0  # the reference lies before the clip
    assert stream.attention is None and f"{name}.attention" not in ref


def test_the_reference_is_appended_after_other_guiding_tokens():
    """Two references: each group at its own negative times, appended in order, the clip's tokens untouched."""
    own = torch.randn(1, 5, 128)
    first, second = torch.randn(1, 8, 3, 16), torch.randn(1, 8, 4, 16)
    stream = apply_conditions(ConditionedStream.start(AUDIO, own, audio_positions(5), 24.0),
                              [EncodedAudioReference(first), EncodedAudioReference(second, 0.5)])
    assert torch.equal(stream.clean[:, :5], own)  # a copy
    assert torch.equal(stream.clean[:, 5:8], patchify_audio(first))
    assert stream.denoise_mask()[0, :, 0].tolist() == [1.0] * 5 + [0.0] * 3 + [0.5] * 4
    assert stream.positions[0, 0, 7, 1].item() == pytest.approx(-0.04)
    assert stream.positions[0, 0, 11, 1].item() == pytest.approx(-0.04)
