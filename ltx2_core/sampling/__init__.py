"""Sampling: sigma schedules and batched multimodal guidance (next: the sync-free Euler loop)."""

from ltx2_core.sampling.guidance import GuidanceParams, GuidanceWeights, active_passes, guidance_weights, guide
from ltx2_core.sampling.schedules import DISTILLED_SIGMAS, STAGE2_SIGMAS, ltx2_sigmas, sigma_table

__all__ = [
    "DISTILLED_SIGMAS",
    "STAGE2_SIGMAS",
    "GuidanceParams",
    "GuidanceWeights",
    "active_passes",
    "guidance_weights",
    "guide",
    "ltx2_sigmas",
    "sigma_table",
]
