"""Sampling: the Stage record, sigma schedules, batched multimodal guidance, and the sync-free denoising loop (Euler
steps, ancestral steps, and the second-order res_2s steps of `ltx2_core.sampling.res2s`)."""

from ltx2_core.sampling.denoise import (
    BatchedPasses,
    ChunkedPasses,
    PassRunner,
    StepSetup,
    denoise,
    guided_setup,
    guided_step,
)
from ltx2_core.sampling.guidance import GuidanceParams, GuidanceWeights, active_passes, guidance_weights, guide
from ltx2_core.sampling.schedules import DISTILLED_SIGMAS, STAGE2_SIGMAS, ltx2_sigmas, sigma_table
from ltx2_core.sampling.stage import Stage
from ltx2_core.sampling.steps import StreamState, euler_step, keep_clean, noised_state, timesteps

__all__ = [
    "DISTILLED_SIGMAS",
    "STAGE2_SIGMAS",
    "BatchedPasses",
    "ChunkedPasses",
    "GuidanceParams",
    "GuidanceWeights",
    "PassRunner",
    "Stage",
    "StepSetup",
    "StreamState",
    "active_passes",
    "denoise",
    "euler_step",
    "guidance_weights",
    "guide",
    "guided_setup",
    "guided_step",
    "keep_clean",
    "ltx2_sigmas",
    "noised_state",
    "sigma_table",
    "timesteps",
]
