"""RoPE tables and token positions vs the reference's patchifiers and rotary embedding (fp32)."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.geometry import audio_latent_length, audio_positions, video_positions
from ltx2_core.model.transformer.rope import apply_rope, rope_tables
from support.reference import import_ltx_core


def test_positions_equal_reference_patchifiers():
    import_ltx_core()
    from ltx_core.components.patchifiers import AudioPatchifier, VideoLatentPatchifier, get_pixel_coords
    from ltx_core.types import AudioLatentShape, SpatioTemporalScaleFactors, VideoLatentShape

    shape = VideoLatentShape(batch=1, channels=128, frames=3, height=2, width=3)
    ref = get_pixel_coords(VideoLatentPatchifier(1).get_patch_grid_bounds(shape), SpatioTemporalScaleFactors.default(),
                           causal_fix=True).float()
    ref[:, 0] = ref[:, 0] / 24.0
    torch.testing.assert_close(video_positions(3, 2, 3, 24.0), ref, atol=1e-6, rtol=1e-6)
    ashape = AudioLatentShape.from_duration(batch=1, duration=17 / 24.0)
    assert audio_latent_length(17, 24.0) == ashape.frames
    ref_audio = AudioPatchifier(1).get_patch_grid_bounds(ashape)
    torch.testing.assert_close(audio_positions(ashape.frames), ref_audio, atol=1e-6, rtol=1e-6)



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
        torch.testing.assert_close(ours.cos, ref[0].transpose(1, 2), atol=1e-6, rtol=1e-6)
