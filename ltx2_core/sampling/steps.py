"""The pieces of one flow-matching step (spec §6), per modality, in the token layout, with fp32 math.

A state is stored in the latent dtype (bf16 in real runs); every update is computed in fp32 and rounded once.
Nothing here reads a tensor on the host, and nothing branches on a tensor's value: whether a stream has a
denoise mask is known when the state is built, so a step's operations are fixed for a whole run.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class StreamState(NamedTuple):
    """One modality's sampling state.

    latent: (1, tokens, channels) the current noisy latent, in the state dtype
    clean:  (1, tokens, channels) the clean latent the conditioned tokens keep (zeros for a fresh generation)
    mask:   (1, tokens, 1) fp32 denoise mask, 1 = generate, 0 = keep `clean`; None when every token is generated
    frozen: the stream is held exactly (mask 0) and its sigma is fed to the transformer as 0 (ltx-pipelines 1.2.0's
            frozen modality, where the release follows it: `Release.frozen_sigma_zero`; a host flag)
    """

    latent: torch.Tensor
    clean: torch.Tensor
    mask: torch.Tensor | None = None
    frozen: bool = False


def noised_state(clean: torch.Tensor, noise: torch.Tensor, scale: float = 1.0,
                 mask: torch.Tensor | None = None) -> StreamState:
    """x = noise·(m·s) + clean·(1 − m·s): s = 1 for a fresh generation, 0.909375 to re-noise a stage-1 result."""
    scaled = torch.full_like(clean[..., :1], scale, dtype=torch.float32) if mask is None else mask * scale
    latent = (noise * scaled + clean * (1 - scaled)).to(clean.dtype)
    return StreamState(latent, clean, mask)


def noised_from(start: torch.Tensor, clean: torch.Tensor, noise: torch.Tensor, scale: float = 1.0,
                mask: torch.Tensor | None = None) -> StreamState:
    """ltx-pipelines 1.2.0's noising: x = clean·(1 − m) + m·(start·(1 − s) + noise·s), in fp32, stored in the
    clean latent's dtype. `start` (1, tokens, C) is the state's own latent (the latent being refined; zeros for
    tokens a condition appended), where `noised_state` (1.0.0) noises the held tokens' clean values; the two agree
    wherever s = 1 or m ∈ {0, 1} with start = clean."""
    scaled = (start.float() * (1 - scale) + noise.float() * scale)
    latent = scaled if mask is None else clean.float() * (1 - mask) + scaled * mask
    return StreamState(latent.to(clean.dtype), clean, mask)


def timesteps(state: StreamState, sigma: torch.Tensor, batch: int) -> torch.Tensor:
    """Per-token noise levels σ·m for `batch` passes: (batch, tokens), or (batch, 1) when there is no mask."""
    if state.mask is None:
        return sigma.reshape(1, 1).expand(batch, 1)
    return (state.mask[..., 0] * sigma).expand(batch, -1)


def stream_sigmas(state: StreamState, sigmas: torch.Tensor) -> torch.Tensor:
    """The (batch,) sigma a stream is fed: `sigmas`, or zeros for a frozen stream (no host read, no branch on a
    tensor: `frozen` is a host flag)."""
    return torch.zeros_like(sigmas) if state.frozen else sigmas


def keep_clean(x0: torch.Tensor, state: StreamState, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """x0·m + clean·(1 − m) in fp32 (or `dtype`: res_2s works in float64): conditioned tokens are denoised to their
    clean values."""
    x0 = x0.to(dtype)
    if state.mask is None:
        return x0
    return x0 * state.mask + state.clean.float() * (1 - state.mask)


def euler_step(latent: torch.Tensor, x0: torch.Tensor, sigma: torch.Tensor, sigma_next: torch.Tensor
               ) -> torch.Tensor:
    """x + v·(σ' − σ) with v = (x − x0)/σ, in fp32, stored in the latent's dtype (σ' = 0 gives x0)."""
    x = latent.float()
    velocity = (x - x0.float()) / sigma
    return (x + velocity * (sigma_next - sigma)).to(latent.dtype)


def euler_ancestral_step(state: StreamState, x0: torch.Tensor, sigma: torch.Tensor, sigma_next: torch.Tensor,
                         noise: torch.Tensor, eta: float = 1.0) -> torch.Tensor:
    """The rectified-flow ancestral Euler step (LTX-2.5's distilled stage 1), in fp32, stored in the latent's dtype.

    A deterministic step to σ↓ = σ'·(1 + (σ'/σ − 1)·η) ≤ σ', then fresh `noise` (1, tokens, C) brings it back up to
    σ' with the signal rescaled by α'/α↓ (α = 1 − σ) so the variance stays that of σ':
    x' = (α'/α↓)·(σ↓/σ·x + (1 − σ↓/σ)·x0) + noise·√max(σ'² − σ↓²α'²/α↓², 0). η = 0 is the plain Euler step.
    At σ' = 0 this is x0 exactly (σ↓ = 0, no noise term), so the last step needs no branch on the schedule.
    `x0` is the prediction with the conditioned tokens already kept (`keep_clean`); they are kept again after the
    noise, which covers every token, except on the last step (σ' = 0), which returns `x0` as it is, as the
    reference's loop does: keeping twice would blend a partly held token (0 < mask < 1) toward its clean value
    once more (a device-side select, no host read)."""
    x = state.latent.float()
    sigma_down = sigma_next * (1 + (sigma_next / sigma - 1) * eta)
    ratio = sigma_down / sigma
    alpha_next, alpha_down = 1 - sigma_next, 1 - sigma_down
    renoise = (sigma_next**2 - sigma_down**2 * alpha_next**2 / alpha_down**2).clamp(min=0).sqrt()
    stepped = (alpha_next / alpha_down) * (ratio * x + (1 - ratio) * x0.float()) + noise.float() * renoise
    kept = keep_clean(stepped, state)
    if state.mask is not None:  # a host flag: the last step's x0 is already kept
        kept = torch.where(sigma_next == 0, x0.float(), kept)
    return kept.to(state.latent.dtype)
