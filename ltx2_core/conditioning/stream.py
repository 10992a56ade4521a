"""The seam between conditions and the sampler: one modality's stream state before noising (`ConditionedStream`)
and the `Condition` protocol that changes it.

A sampling stage starts one state per modality from the latent's own tokens (nothing held, nothing appended) and
lets every condition of that modality change it, in order. What a condition may change: the clean values that
tokens keep and how strongly (the denoise mask, per-token timesteps σ·m), guiding tokens appended after the
latent's own (with their positions; dropped after the last step), and which tokens attend to which. Every field a
condition did not touch stays "none", so an unconditioned stream samples exactly as without the seam.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, Protocol

import torch
import torch.nn.functional as F

Modality = Literal["video", "audio"]
VIDEO: Modality = "video"
AUDIO: Modality = "audio"


class ConditionedStream(NamedTuple):
    """One modality's tokens (batch 1) as its conditions leave them, before noising.

    modality:  "video" or "audio"
    clean:     (1, T + K, C) the latent's T tokens, then K guiding tokens appended by conditions; the values that
               held tokens keep (the sampler noises the rest)
    positions: (1, axes, T + K, 2) [start, end) bounds of every token: time in seconds (video: then y, x in pixels)
    fps:       the clip's frame rate (a condition placing tokens at a pixel frame needs it)
    tokens:    T, the latent's own tokens: the sampler returns these and drops the guiding ones
    mask:      (1, T + K, 1) fp32 denoise mask, 1 = generate, 0 = keep `clean`; None: every token is generated
    attention: (1, 1, T + K, T + K) bool, True where a query token attends to a key token; None: all attend to all
    frozen:    every token is held exactly and the stream is not sampled at all (the reference's frozen modality);
               where the release's reference does so (`Release.frozen_sigma_zero`: 2.5) the sampler also feeds the
               stream's sigma to the transformer as 0, which the text and cross-modal modulations read
    """

    modality: Modality
    clean: torch.Tensor
    positions: torch.Tensor
    fps: float
    tokens: int
    mask: torch.Tensor | None = None
    attention: torch.Tensor | None = None
    frozen: bool = False

    @classmethod
    def start(cls, modality: Modality, clean: torch.Tensor, positions: torch.Tensor,
              fps: float) -> ConditionedStream:
        """The unconditioned state of a latent's tokens `clean` (1, T, C) at `positions` (1, axes, T, 2)."""
        return cls(modality, clean, positions, fps, clean.shape[1])

    def denoise_mask(self) -> torch.Tensor:
        """The mask, or all ones (1, T + K, 1) fp32 when no condition has set one yet (every token generated)."""
        if self.mask is not None:
            return self.mask
        return torch.ones(*self.clean.shape[:2], 1, device=self.clean.device)

    def hold(self, start: int, clean: torch.Tensor, mask: float | torch.Tensor) -> ConditionedStream:
        """Tokens [start, start + n) keep `clean` (1, n, C) with denoise mask `mask` (0: exactly, 1: not at all; a
        number, or one per token (1, n, 1) fp32)."""
        end = start + clean.shape[1]
        held, denoise = self.clean.clone(), self.denoise_mask().clone()
        held[:, start:end] = clean
        denoise[:, start:end] = mask
        return self._replace(clean=held, mask=denoise)

    def in_span(self, start: float, end: float) -> torch.Tensor:
        """(1, T, 1) fp32 over the latent's own tokens: 1 where a token's time [t0, t1) meets [start, end) seconds
        (t1 > start and t0 < end: a token straddling a border counts as inside, as the reference's
        `TemporalRegionMask`), else 0."""
        time = self.positions[:, 0, :self.tokens]
        return ((time[..., 1] > start) & (time[..., 0] < end)).float()[..., None]

    def hold_clip(self, clean: torch.Tensor, strength: float, span: tuple[float, float] | None) -> ConditionedStream:
        """Every latent token held at `clean` (1, T, C) with mask 1 − strength, and the stream frozen at strength 1
        (a video or sound held over the clip); with a `span` (start, end) seconds the tokens meeting it get mask 1
        (regenerated from noise: a retake) and the stream is not frozen."""
        if span is None:
            held = self.hold(0, clean, 1.0 - strength)
            return held._replace(frozen=True) if strength == 1 else held
        inside = self.in_span(*span)
        return self.hold(0, clean, inside + (1 - inside) * (1.0 - strength))

    def append(self, clean: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> ConditionedStream:
        """Guiding tokens `clean` (1, K, C) with denoise mask `mask` (1, K, 1) fp32 at `positions` (1, axes, K, 2)
        appended; they attend to and are attended by every token (the attention mask, if any, grows with True)."""
        added = clean.shape[1]
        attention = None if self.attention is None else F.pad(self.attention, (0, added, 0, added), value=True)
        return self._replace(clean=torch.cat([self.clean, clean], dim=1),
                             mask=torch.cat([self.denoise_mask(), mask], dim=1),
                             positions=torch.cat([self.positions, positions], dim=2), attention=attention)


class Condition(Protocol):
    """Something held during sampling (an encoded image at a frame, ...): it names the modality it conditions and
    changes that stream's state. Tensors it holds may live anywhere; `apply` brings them to the stream's device."""

    @property
    def modality(self) -> Modality: ...

    def apply(self, stream: ConditionedStream) -> ConditionedStream:
        """`stream` with this condition applied (a new state; the given one is not modified)."""
        ...
