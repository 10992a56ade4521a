"""Sigma schedules (spec §6): the LTX2 shifted-and-stretched schedule and the distilled / stage-2 tables.

A schedule is computed once per run on the host, with the reference's fp32 operations (so both give the same
values bit for bit), and moved to the sampling device in one copy; the denoising loop only indexes it there.
"""

from __future__ import annotations

import math

import torch

BASE_SHIFT_TOKENS, MAX_SHIFT_TOKENS = 1024, 4096  # the token counts the shift is anchored at
# the reference pipelines pass no latent, so the shift is always the one at 4096 tokens (2.05)
DEFAULT_TOKENS = MAX_SHIFT_TOKENS
DISTILLED_SIGMAS = (1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0)  # 8 steps
STAGE2_SIGMAS = (0.909375, 0.725, 0.421875, 0.0)  # 3 steps after the x2 upsample; 0.909375 is the re-noise level


def ltx2_sigmas(
    steps: int,
    tokens: int | None = None,
    *,
    max_shift: float = 2.05,
    base_shift: float = 0.95,
    terminal: float | None = 0.1,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """(steps + 1,) fp32 sigmas from 1 to 0: a linear grid shifted by `e^shift / (e^shift + 1/σ − 1)`, then
    stretched so that the last non-zero sigma is `terminal` (None: no stretch).

    `tokens` (video latent F'·H'·W') makes the shift grow with the video size, interpolated between base_shift at
    1024 tokens and max_shift at 4096; None uses 4096, which is what the reference pipelines do.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be an integer ≥ 1, got {steps!r}")
    slope = (max_shift - base_shift) / (MAX_SHIFT_TOKENS - BASE_SHIFT_TOKENS)
    shift = (DEFAULT_TOKENS if tokens is None else tokens) * slope + base_shift - slope * BASE_SHIFT_TOKENS
    grid = torch.linspace(1.0, 0.0, steps + 1)[:-1]  # the final 0 stays 0
    sigmas = math.exp(shift) / (math.exp(shift) + (1 / grid - 1))
    if terminal is not None:
        one_minus = 1.0 - sigmas
        sigmas = 1.0 - one_minus / (one_minus[-1] / (1.0 - terminal))
    return torch.cat([sigmas, torch.zeros(1)]).to(device=device, dtype=torch.float32)


def sigma_table(values: tuple[float, ...], device: torch.device | str | None = None) -> torch.Tensor:
    """A fixed table (e.g. DISTILLED_SIGMAS) as an fp32 tensor on `device`, in one host-to-device copy."""
    return torch.tensor(values, dtype=torch.float32).to(device)
