"""Multimodal guidance in x0 space (spec §6), batched and branch-free.

Per modality: `pred = c + (cfg−1)(c − u_text) + stg·(c − u_perturbed) + (mod−1)(c − u_isolated)`, then the
rescale `pred · (r·std(c)/(std(pred)+ε) + 1 − r)`. Which passes run is decided once per run from the host-side
scales (a pass whose scale is neutral for both modalities is dropped and never computed); the scales themselves
become device tensors, so the per-step math reads no value on the host, has no Python branch on a scale, and
changing a scale between runs never recompiles. The ε keeps the rescale finite when a prediction is constant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from ltx2_core.releases import RELEASES

PASSES = ("cond", "uncond", "perturbed", "isolated")  # positive; negative prompt; STG; no cross-modal attention
RESCALE_EPS = 1e-6


@dataclass(frozen=True)
class GuidanceParams:
    """One modality's guidance scales (neutral defaults: plain conditional prediction)."""

    cfg: float = 1.0
    stg: float = 0.0
    stg_blocks: tuple[int, ...] = ()
    rescale: float = 0.0
    modality: float = 1.0

    def __post_init__(self) -> None:
        bad = [f"{name}={value!r}" for name, value in (("cfg", self.cfg), ("stg", self.stg),
               ("rescale", self.rescale), ("modality", self.modality)) if not value >= 0]
        if bad:
            raise ValueError(f"guidance scales must be ≥ 0 (1 disables cfg and modality, 0 disables stg and "
                             f"rescale); got {', '.join(bad)}")

    def terms(self) -> dict[str, float]:
        """Weight of (c − u_pass) for every pass but `cond`."""
        return {"uncond": self.cfg - 1.0, "perturbed": self.stg, "isolated": self.modality - 1.0}


def active_passes(*modalities: GuidanceParams) -> tuple[str, ...]:
    """`cond` plus every pass some modality gives a non-zero weight, in PASSES order (decided once per run)."""
    needed = {name for params in modalities for name, weight in params.terms().items() if weight != 0}
    return tuple(name for name in PASSES if name == "cond" or name in needed)


class GuidanceWeights(NamedTuple):
    """Device-side scales of one modality: `terms` (passes − 1,) for the non-cond passes, `rescale` 0-d."""

    terms: torch.Tensor
    rescale: torch.Tensor


def guidance_weights(params: GuidanceParams, passes: tuple[str, ...], device: torch.device | str | None = None
                     ) -> GuidanceWeights:
    """The scales as fp32 device tensors, in one host-to-device copy at set-up."""
    terms = params.terms()
    values = torch.tensor([terms[name] for name in passes[1:]] + [params.rescale], dtype=torch.float32).to(device)
    return GuidanceWeights(values[:-1], values[-1])


def guide(predictions: torch.Tensor, weights: GuidanceWeights, eps: float = RESCALE_EPS) -> torch.Tensor:
    """predictions (P, B, T, C) x0 of the active passes (cond first) -> guided x0 (B, T, C), fp32 math.

    The rescale's standard deviations are per sample, over all of its tokens and channels (the reference runs B=1).
    """
    x0 = predictions.float()
    cond = x0[0]
    pred = cond + torch.tensordot(weights.terms, cond.unsqueeze(0) - x0[1:], dims=1)
    ratio = cond.std(dim=(-2, -1), keepdim=True) / (pred.std(dim=(-2, -1), keepdim=True) + eps)
    factor = weights.rescale * ratio + (1.0 - weights.rescale)
    return (pred * factor).to(predictions.dtype)


def default_steps(version: str) -> int:
    """Steps of the released one-stage / stage-1 schedule (40 for LTX-2.0, 30 for LTX-2.3)."""
    return RELEASES[version].steps


def default_guidance(version: str, num_layers: int | None = None) -> tuple[GuidanceParams, GuidanceParams]:
    """The released (video, audio) guidance of a model version. A model shallower than the release (the tiny
    demo, `num_layers` blocks; None: the release's depth) perturbs its last block instead of a deeper STG block."""
    release = RELEASES[version]
    last = (release.layers if num_layers is None else num_layers) - 1
    blocks = tuple(dict.fromkeys(min(block, last) for block in release.stg_blocks))
    return (GuidanceParams(**release.video_guidance._asdict(), stg_blocks=blocks),
            GuidanceParams(**release.audio_guidance._asdict(), stg_blocks=blocks))
