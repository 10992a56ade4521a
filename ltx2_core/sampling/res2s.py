"""The res_2s sampler (ltx-pipelines 1.2.0's `res2s_audio_video_denoising_loop`, the HQ two-stage pipeline's): a
second-order exponential Runge-Kutta step with SDE noise, two guided predictions per step, in float64.

Per interval σ → σ' (h = log(σ/σ'), c2 = 0.5, coefficients `res2s_coefficients`):

* x0 at σ (one batched forward of every guidance pass) -> d1; x_mid = x + h·a21·(d1 − x);
* x_mid re-noised by an SDE step from σ to σ_sub = √(σσ') (`sde_coefficients`, η 0.5), its conditioned tokens kept;
* where h < 0.5 and σ > 0.03, the anchor x moves to the fixed point of x = x_mid − h·a21·(d1 − x) (the reference
  iterates it 100 times; c = h·a21 < 0.25, so c^100 is far below float64's resolution: the closed form here);
* x0 at σ_sub on x_mid rounded to the state's dtype -> d2; x' = x + h·(b1·(d1 − x) + b2·(d2 − x));
* x' re-noised by an SDE step from σ to σ' (η 0.5), kept, rounded to the state's dtype.

A schedule falling to 0 ends at 0.0011 instead, and the x0 at 0.0011 is the result (one more prediction). The SDE
noise comes from two generators seeded with the reference's fixed seeds (`RES2S_STEP_SEED`, `RES2S_SUBSTEP_SEED`:
every run seed shares it, as in the reference, where only the initial noise follows the seed).

All coefficients, the bong choice and the final step are host data made once from the host schedule (`res2s_plan`);
a step indexes device rows with a host counter, so it never reads a device value (0 host syncs per step).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ltx2_core.sampling.denoise import StepSetup, guided_prediction
from ltx2_core.sampling.steps import StreamState, keep_clean

# ltx_pipelines/utils/samplers.py: the loop's default noise_seed (-1: torch's seed 2^64 − 1) and noise_seed + 10000;
# the reference's pipelines never pass one, so every run seed shares this SDE noise
RES2S_STEP_SEED, RES2S_SUBSTEP_SEED = -1, 9999
FINAL_SIGMA = 0.0011  # where a schedule falling to 0 stops: the last prediction's x0 is the result
ETA = 0.5  # the SDE noise of the step and of the substep (the reference's defaults)

# the columns of Res2sPlan.rows
SUB, C, H, B1, B2, SUB_DEN, SUB_ALPHA, SUB_DOWN, SUB_UP, SIGMA, DEN, ALPHA, DOWN, UP = range(14)


def phi(j: int, neg_h: float) -> float:
    """φj(z) = (e^z − Σ_{k<j} z^k/k!) / z^j, 1/j! at z = 0."""
    if abs(neg_h) < 1e-10:
        return 1.0 / math.factorial(j)
    remainder = sum(neg_h**k / math.factorial(k) for k in range(j))
    return (math.exp(neg_h) - remainder) / neg_h**j


def res2s_coefficients(h: float, c2: float = 0.5) -> tuple[float, float, float]:
    """(a21, b1, b2) of the two-stage exponential integrator for a step of log-size h: a21 = c2·φ1(−h·c2),
    b2 = φ2(−h)/c2, b1 = φ1(−h) − b2."""
    a21 = c2 * phi(1, -h * c2)
    b2 = phi(2, -h) / c2
    return a21, phi(1, -h) - b2, b2


def sde_coefficients(sigma: torch.Tensor, sigma_next: torch.Tensor, eta: float = ETA) -> list[torch.Tensor]:
    """(σ − σ', α, σ↓, σ↑) of the SDE step σ → σ' (0-d tensors, in their dtype, as the reference's
    `Res2sDiffusionStep.get_sde_coeff` computes them): σ↑ = min(σ'η, 0.9999σ'), α = (1 − σ') + √(σ'² − σ↑²),
    σ↓ = √(σ'² − σ↑²)/α."""
    up = torch.minimum(sigma_next * eta, sigma_next * 0.9999)
    residual = (sigma_next**2 - up**2).clamp(min=0) ** 0.5
    alpha = (1 - sigma_next) + residual
    down = torch.nan_to_num(residual / alpha, nan=float(sigma_next))
    return [sigma - sigma_next, torch.nan_to_num(alpha, 1.0), down, torch.nan_to_num(up, 0.0)]


class Res2sPlan(NamedTuple):
    """A stage's res_2s schedule, made on the host.

    sigmas: (m,) fp32: the schedule, 0.0011 inserted before a final 0; `denoise` runs m − 1 steps over it
    rows:   (n, 14) float64, one per res_2s interval (the columns above)
    bong:   per interval, whether the anchor moves to its fixed point (h < 0.5 and σ > 0.03)
    sde:    per interval, whether the step's SDE noise applies (σ↑ and σ' non-zero; else x' is kept as it is)
    """

    sigmas: torch.Tensor
    rows: torch.Tensor
    bong: tuple[bool, ...]
    sde: tuple[bool, ...]

    def to(self, device: torch.device | str) -> Res2sPlan:
        """The plan with its sigmas and rows on `device` (one copy each, before the loop)."""
        return self._replace(sigmas=self.sigmas.to(device), rows=self.rows.to(device))


def res2s_plan(sigmas: torch.Tensor, eta: float = ETA) -> Res2sPlan:
    """The plan of a (steps + 1,) fp32 schedule on the CPU (host reads here, once per stage)."""
    sigmas = sigmas.detach().float().cpu()
    intervals = sigmas.shape[0] - 1
    if float(sigmas[-1]) == 0:
        sigmas = torch.cat([sigmas[:-1], torch.tensor([FINAL_SIGMA, 0.0])])
    wide = sigmas.double()
    rows, bong, sde = [], [], []
    for i in range(intervals):
        sigma, sigma_next = wide[i], wide[i + 1]
        h = float(-torch.log(sigma_next / sigma))
        a21, b1, b2 = res2s_coefficients(h)
        sub = torch.sqrt(sigma * sigma_next)
        sub_coefficients = sde_coefficients(sigma, sub, 0.5)  # the reference's substep η is always 0.5
        step_coefficients = sde_coefficients(sigmas[i], sigmas[i + 1], eta)  # fp32, as the reference's schedule
        rows.append([float(sub), h * a21, h, b1, b2, *map(float, sub_coefficients), float(sigma),
                     *map(float, step_coefficients)])
        bong.append(h < 0.5 and float(sigma) > 0.03)
        sde.append(float(step_coefficients[3]) != 0 and float(sigmas[i + 1]) != 0)
    return Res2sPlan(sigmas, torch.tensor(rows, dtype=torch.float64).reshape(intervals, 14), tuple(bong), tuple(sde))


def res2s_noise(latent: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The reference's SDE noise for a (1, tokens, C) state: float64 normal draws on the generator's device,
    normalised over the whole tensor, then over its last two dims (device reductions: no host read)."""
    noise = torch.randn(latent.shape, generator=generator, dtype=torch.float64, device=generator.device)
    noise = (noise - noise.mean()) / noise.std()
    centred = noise - noise.mean(dim=(-2, -1), keepdim=True)
    return centred / centred.std(dim=(-2, -1), keepdim=True)


def sde_step(sample: torch.Tensor, target: torch.Tensor, row: torch.Tensor, first: int, noise: torch.Tensor
             ) -> torch.Tensor:
    """The SDE step from `sample` (at σ) towards `target` (at σ'), coefficients row[first:first + 4] (σ − σ', α,
    σ↓, σ↑) and row[SIGMA]: x = α·(sample − σ·ε + σ↓·ε) + σ↑·noise with ε = (sample − target)/(σ − σ')."""
    den, alpha, down, up = row[first], row[first + 1], row[first + 2], row[first + 3]
    eps = (sample - target) / den
    return alpha * ((sample - row[SIGMA] * eps) + down * eps) + up * noise


class Res2sStep:
    """A `Step` of the res_2s sampler over `plan.sigmas` (`denoise` runs len(plan.sigmas) − 1 steps): one res_2s
    interval per step, then, where the schedule fell to 0, the x0 at 0.0011. Holds a host counter (which interval),
    so one instance samples one stage once. `guided_prediction` runs every guidance pass as one batched forward."""

    def __init__(self, plan: Res2sPlan, step_generator: torch.Generator, substep_generator: torch.Generator) -> None:
        self.plan, self.step_generator, self.substep_generator = plan, step_generator, substep_generator
        self.index = 0

    def __call__(self, setup: StepSetup, video: StreamState | None, audio: StreamState, sigma: torch.Tensor,
                 sigma_next: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        index, self.index = self.index, self.index + 1
        if index >= len(self.plan.bong):  # the last prediction, at 0.0011: its x0 is the result
            x0 = guided_prediction(setup, video, audio, sigma)
            return tuple(None if s is None else x.to(s.latent.dtype) for s, x in zip((video, audio), x0))
        return self.advance(setup, video, audio, sigma, index, *self.draw(video, audio))

    def draw(self, video: StreamState | None, audio: StreamState) -> tuple[torch.Tensor | None, ...]:
        """One interval's SDE noise: the substep's video and audio, then the step's (video None: None)."""
        return tuple(None if state is None else res2s_noise(state.latent, generator)
                     for generator in (self.substep_generator, self.step_generator) for state in (video, audio))

    def advance(self, setup: StepSetup, video: StreamState | None, audio: StreamState, sigma: torch.Tensor,
                index: int, *noises: torch.Tensor | None) -> tuple[torch.Tensor | None, torch.Tensor]:
        """Interval `index` from σ (`sigma`, a 0-d device tensor) with its noise given (`draw`)."""
        row, states = self.plan.rows[index], (video, audio)
        first = guided_prediction(setup, video, audio, sigma)
        mids = [None if s is None else _midpoint(s, x0, row, noise, self.plan.bong[index])
                for s, x0, noise in zip(states, first, noises[:2])]
        mid_states = [None if s is None else s._replace(latent=m.mid.to(s.latent.dtype)) for s, m in zip(states, mids)]
        second = guided_prediction(setup, *mid_states, row[SUB].float())
        return tuple(None if s is None else _combined(s, m, x0, row, noise, self.plan.sde[index])
                     for s, m, x0, noise in zip(states, mids, second, noises[2:]))


class _Midpoint(NamedTuple):
    anchor: torch.Tensor  # x (float64), moved to its fixed point on a bong interval
    eps: torch.Tensor  # d1 − x
    mid: torch.Tensor  # the substep's state (float64)


def _midpoint(state: StreamState, x0: torch.Tensor, row: torch.Tensor, noise: torch.Tensor, bong: bool) -> _Midpoint:
    """The substep of one stream: x_mid from the first prediction, re-noised to σ_sub and kept; the anchor moved."""
    anchor = state.latent.to(torch.float64)
    d1 = x0.to(torch.float64)  # `guided_prediction` kept its conditioned tokens (once: a blend at strength < 1)
    eps = d1 - anchor
    mid = keep_clean(sde_step(anchor, anchor + row[C] * eps, row, SUB_DEN, noise), state, torch.float64)
    if bong:  # the fixed point of x = x_mid − c·(d1 − x), c = h·a21
        anchor = (mid - row[C] * d1) / (1 - row[C])
        eps = d1 - anchor
    return _Midpoint(anchor, eps, mid)


def _combined(state: StreamState, mid: _Midpoint, x0: torch.Tensor, row: torch.Tensor, noise: torch.Tensor,
              sde: bool) -> torch.Tensor:
    """x' = x + h·(b1·ε1 + b2·(d2 − x)), re-noised to σ' (where the plan says so), kept, in the state's dtype."""
    d2 = x0.to(torch.float64)
    following = mid.anchor + row[H] * (row[B1] * mid.eps + row[B2] * (d2 - mid.anchor))
    if sde:
        following = sde_step(mid.anchor, following, row, DEN, noise)
    return keep_clean(following, state, torch.float64).to(state.latent.dtype)


__all__ = ["FINAL_SIGMA", "RES2S_STEP_SEED", "RES2S_SUBSTEP_SEED", "Res2sPlan", "Res2sStep", "phi", "res2s_coefficients",
           "res2s_noise", "res2s_plan", "sde_coefficients", "sde_step"]
