"""Our transformer vs diffusers' `LTX2VideoTransformer3DModel` holding the same weights (renamed as diffusers'
conversion script does), fp32, one pass. This is what makes the GPU suite's side-by-side timings a comparison of
the same computation; tolerance atol 1e-5 / rtol 1e-5: the same fp32 ops, differently associated (measured ≤ 5e-6
on outputs of magnitude ~8)."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_positions, video_positions
from ltx2_core.types import StreamInput
from support.diffusers import diffusers_forward, diffusers_transformer

FRAMES, ROWS, COLS, AUDIO_TOKENS, TEXT_TOKENS = 2, 2, 3, 9, 5


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_one_pass_equals_diffusers(version):
    config = TransformerConfig.tiny(version, num_layers=2)
    ours = demo_transformer(config, seed=1)
    theirs = diffusers_transformer(config, ours.state_dict())
    g = torch.Generator().manual_seed(3)
    video = torch.randn(2, FRAMES * ROWS * COLS, 128, generator=g)
    audio = torch.randn(2, AUDIO_TOKENS, 128, generator=g)
    widths = (config.caption_channels or config.video.context_dim, config.caption_channels or config.audio.context_dim)
    context = tuple(torch.randn(2, TEXT_TOKENS, w, generator=g) for w in widths)
    vpos, apos = video_positions(FRAMES, ROWS, COLS, 24.0), audio_positions(AUDIO_TOKENS)
    sigma = torch.full((2,), 0.7)
    with torch.no_grad():
        run = ours.prepare_run(vpos, apos, *context)
        got = ours(StreamInput(video, sigma, sigma[:, None]), StreamInput(audio, sigma, sigma[:, None]), run)
        want = diffusers_forward(theirs, config, video, audio, context, 0.7, vpos, apos)
    for ours_out, theirs_out in zip(got, want):
        assert ours_out.abs().max() > 1.0  # not a degenerate output
        torch.testing.assert_close(ours_out, theirs_out, atol=1e-5, rtol=1e-5)
