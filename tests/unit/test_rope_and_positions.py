"""RoPE tables and token positions vs the reference (exact layouts, fp32)."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.latents import (
    audio_latent_length, audio_positions, patchify_audio, patchify_video, unpatchify_audio, unpatchify_video,
    video_positions,
)
from ltx2_core.model.transformer.rope import apply_rope, rope_tables
from ltx2_core.types import Rope
from support.reference import import_ltx_core


def test_positions_equal_reference_patchifiers():
    import_ltx_core()
    from ltx_core.components.patchifiers import AudioPatchifier, VideoLatentPatchifier, get_pixel_coords
    from ltx_core.types import AudioLatentShape, SpatioTemporalScaleFactors, VideoLatentShape

    shape = VideoLatentShape(batch=1, channels=128, frames=3, height=2, width=3)
    ref = get_pixel_coords(VideoLatentPatchifier(1).get_patch_grid_bounds(shape), SpatioTemporalScaleFactors.default(),
                           causal_fix=True).float()
    ref[:, 0] = ref[:, 0] / 24.0
    torch.testing.assert_close(video_positions(3, 2, 3, 24.0), ref, atol=0, rtol=0)
    ashape = AudioLatentShape.from_duration(batch=1, duration=17 / 24.0)
    assert audio_latent_length(17, 24.0) == ashape.frames
    ref_audio = AudioPatchifier(1).get_patch_grid_bounds(ashape)
    torch.testing.assert_close(audio_positions(ashape.frames), ref_audio, atol=0, rtol=0)


def test_patchify_round_trips():
    video = torch.randn(2, 128, 3, 2, 3)
    audio = torch.randn(2, 8, 5, 16)
    assert torch.equal(unpatchify_video(patchify_video(video), 3, 2, 3), video)
    assert torch.equal(unpatchify_audio(patchify_audio(audio), 8), audio)
    assert torch.equal(patchify_audio(audio)[0, 1, 16 * 2 + 5], audio[0, 2, 1, 5])  # feature c·16 + mel_bin


@pytest.mark.parametrize("rope_type", ["split", "interleaved"])
@pytest.mark.parametrize("float64", [True, False])
def test_rope_tables_and_rotation_equal_reference(rope_type, float64):
    import_ltx_core()
    from ltx_core.model.transformer.rope import (
        LTXRopeType, apply_rotary_emb, generate_freq_grid_np, generate_freq_grid_pytorch, precompute_freqs_cis,
    )

    heads, dim = 2, 20  # 20 channels over 3 axes leaves padding in both layouts
    positions = video_positions(3, 2, 3, 25.0)
    ours = rope_tables(positions, dim=dim, heads=heads, max_pos=(20, 2048, 2048), theta=10000.0,
                       rope_type=rope_type, float64=float64, dtype=torch.float32)
    grid = generate_freq_grid_np if float64 else generate_freq_grid_pytorch
    ref_type = LTXRopeType(rope_type)
    ref = precompute_freqs_cis(positions, dim=dim, out_dtype=torch.float32, max_pos=[20, 2048, 2048],
                               use_middle_indices_grid=True, num_attention_heads=heads, rope_type=ref_type,
                               freq_grid_generator=grid)
    x = torch.randn(1, positions.shape[2], dim)
    got = apply_rope(x.unflatten(-1, (heads, -1)), ours, rope_type).flatten(-2)
    torch.testing.assert_close(got, apply_rotary_emb(x, ref, ref_type), atol=1e-6, rtol=1e-6)
    if rope_type == "split":  # ref stores (B, heads, T, head_dim/2); ours (B, T, heads, head_dim/2)
        torch.testing.assert_close(ours.cos, ref[0].transpose(1, 2), atol=0, rtol=0)


def test_rope_broadcasts_over_batch_and_preserves_norm():
    rope = rope_tables(audio_positions(7), dim=16, heads=2, max_pos=(20,), theta=10000.0, rope_type="split",
                       float64=True, dtype=torch.float32)
    x = torch.randn(4, 7, 2, 8)
    y = apply_rope(x, rope, "split")
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))  # a rotation
    assert torch.equal(apply_rope(x[2:3], rope, "split"), y[2:3])
    assert isinstance(rope, Rope) and rope.cos.shape == (1, 7, 2, 4)
