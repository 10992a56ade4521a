"""Patchifying is a pure rearrangement, and RoPE is a rotation that broadcasts over the batch."""

from __future__ import annotations

import torch

from ltx2_core.geometry import (
    audio_positions, patchify_audio, patchify_video, unpatchify_audio, unpatchify_video,
)
from ltx2_core.model.transformer.rope import apply_rope, rope_tables
from ltx2_core.types import Rope


def test_patchify_round_trips():
    video = torch.randn(2, 128, 3, 2, 3)
    audio = torch.randn(2, 8, 5, 16)
    # patchifying only moves values: pure copies, bit for bit
    assert torch.equal(unpatchify_video(patchify_video(video), 3, 2, 3), video)
    assert torch.equal(unpatchify_audio(patchify_audio(audio), 8), audio)
    assert torch.equal(patchify_audio(audio)[0, 1, 16 * 2 + 5], audio[0, 2, 1, 5])  # a copy: feature c·16 + mel_bin


def test_rope_broadcasts_over_batch_and_preserves_norm():
    rope = rope_tables(audio_positions(7), dim=16, heads=2, max_pos=(20,), theta=10000.0, rope_type="split",
                       float64=True, dtype=torch.float32)
    x = torch.randn(4, 7, 2, 8)
    y = apply_rope(x, rope, "split")
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))  # a rotation
    torch.testing.assert_close(apply_rope(x[2:3], rope, "split"), y[2:3], atol=1e-6, rtol=1e-6)
    assert isinstance(rope, Rope) and rope.cos.shape == (1, 7, 2, 4)
