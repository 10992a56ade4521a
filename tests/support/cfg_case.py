"""A guided sampling run on the tiny 2.3 transformer with all four guidance passes (or three), shared by the
single-process, replica and multi-rank CFG tests: the same seeded model, prompts and noise everywhere."""

from __future__ import annotations

import torch

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_transformer
from ltx2_core.geometry import audio_positions, video_positions
from ltx2_core.sampling import GuidanceParams, denoise, guided_setup, ltx2_sigmas, noised_state
from ltx2_core.types import TextEmbeddings

FRAMES, ROWS, COLS, AUDIO_TOKENS = 2, 2, 3, 9
FULL = (GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(1,), rescale=0.7, modality=3.0),
        GuidanceParams(cfg=7.0, stg=1.0, stg_blocks=(1,), rescale=0.7, modality=3.0))
THREE = (GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(1,)), GuidanceParams(cfg=7.0, stg=1.0, stg_blocks=(1,)))


def model():
    return demo_transformer(TransformerConfig.tiny("2.3"), seed=4)


def weights(tokens: int = FRAMES * ROWS * COLS, first: int = ROWS * COLS) -> torch.Tensor:
    """Attention weights (1, tokens, tokens) as a weighted IC-LoRA control leaves them: the `first` tokens weigh
    the others 0.5 and the others do not see them (0)."""
    out = torch.ones(1, tokens, tokens)
    out[:, :first, first:] = 0.5
    out[:, first:, :first] = 0.0
    return out


def plan(transformer, guidance=FULL, runner=None, video_attention=None):
    g = torch.Generator().manual_seed(0)
    cfg = transformer.config
    positive, negative = (TextEmbeddings(torch.randn(1, 5, cfg.video.context_dim, generator=g),
                                         torch.randn(1, 5, cfg.audio.context_dim, generator=g)) for _ in range(2))
    return guided_setup(transformer, positive, negative, video_positions(FRAMES, ROWS, COLS, 24.0),
                        audio_positions(AUDIO_TOKENS), *guidance, runner=runner, video_attention=video_attention)


def states():
    g = torch.Generator().manual_seed(1)
    video = torch.randn(1, FRAMES * ROWS * COLS, 128, generator=g)
    audio = torch.randn(1, AUDIO_TOKENS, 128, generator=g)
    return noised_state(torch.zeros_like(video), video), noised_state(torch.zeros_like(audio), audio)


def run(step_plan, steps: int = 3):
    video, audio = denoise(step_plan, *states(), ltx2_sigmas(steps))
    return video.latent, audio.latent
