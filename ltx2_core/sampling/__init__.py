"""Sampling: sigma schedules (and, next, the sync-free Euler step and batched multimodal guidance)."""

from ltx2_core.sampling.schedules import DISTILLED_SIGMAS, STAGE2_SIGMAS, ltx2_sigmas, sigma_table

__all__ = ["DISTILLED_SIGMAS", "STAGE2_SIGMAS", "ltx2_sigmas", "sigma_table"]
