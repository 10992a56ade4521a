"""The seam between conditions and the sampler: one modality's stream state before noising (`ConditionedStream`)
and the `Condition` protocol that changes it.

A sampling stage starts one state per modality from the latent's own tokens (nothing held, nothing appended) and
lets every condition of that modality change it, in order. What a condition may change: the clean values that
tokens keep and how strongly (the denoise mask, per-token timesteps σ·m), guiding tokens appended after the
latent's own (with their positions; dropped after the last step), and how strongly tokens attend to each other
(attention weights, which the transformer adds as log w to the video self-attention). Every field a condition did
not touch stays "none", so an unconditioned stream samples exactly as without the seam.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, Protocol

import torch

from ltx2_core.geometry import VIDEO_TIME_SCALE

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
    attention: (1, T + K, T + K) fp32 attention weights in [0, 1] (query row, key column; 1: full attention, 0:
               none; the transformer adds log w to the video self-attention scores), set when a condition weights
               its guiding tokens (`append` with `attention`); None: all attend to all
    frozen:    every token is held exactly and the stream is not sampled at all (the reference's frozen modality);
               where the release's reference does so (`Release.frozen_sigma_zero`: 2.5) the sampler also feeds the
               stream's sigma to the transformer as 0, which the text and cross-modal modulations read
    frozen_noised: the frozen clip is one the reference noises at the stage's noise scale before freezing it (its
               retake's kept streams, sound for a video's video), where the release follows it
               (`Release.frozen_noised`: 2.5); False: held clean (audio-to-video's sound)
    keyframe_frames: the time span, in pixel frames, of a single-image keyframe's tokens (`Release.keyframe_frames`:
               8 for 1.0.0's rule, 1 for 1.2.0's)
    grid:      (F', H', W') latent frames, rows and columns of the latent's own tokens (video; None: not given)
    marked:    (1, T + K, 1) fp32, 1 on appended tokens the transformer's keyframe embedding marks besides the first
               latent frame (generated keyframe slots, `keyframe_slots`); None: none marked
    initial:   (1, K, C) the appended tokens' values before noising (a slot seeded with content); None: zeros
    slots:     (first token, count) of the generated keyframe slots, whose denoised content the sampler returns
               (`AVLatent.keyframes`); None: no slots
    """

    modality: Modality
    clean: torch.Tensor
    positions: torch.Tensor
    fps: float
    tokens: int
    mask: torch.Tensor | None = None
    attention: torch.Tensor | None = None
    frozen: bool = False
    frozen_noised: bool = False
    keyframe_frames: int = VIDEO_TIME_SCALE
    grid: tuple[int, int, int] | None = None
    marked: torch.Tensor | None = None
    initial: torch.Tensor | None = None
    slots: tuple[int, int] | None = None

    @classmethod
    def start(cls, modality: Modality, clean: torch.Tensor, positions: torch.Tensor, fps: float,
              keyframe_frames: int = VIDEO_TIME_SCALE, grid: tuple[int, int, int] | None = None) -> ConditionedStream:
        """The unconditioned state of a latent's tokens `clean` (1, T, C) at `positions` (1, axes, T, 2)."""
        return cls(modality, clean, positions, fps, clean.shape[1], keyframe_frames=keyframe_frames, grid=grid)

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

    def hold_clip(self, clean: torch.Tensor, strength: float, span: tuple[float, float] | None,
                  noised: bool = False) -> ConditionedStream:
        """Every latent token held at `clean` (1, T, C) with mask 1 − strength, and the stream frozen at strength 1
        (a video or sound held over the clip; `noised`: one the reference noises before freezing, `frozen_noised`);
        with a `span` (start, end) seconds the tokens meeting it get mask 1 (regenerated from noise: a retake) and
        the stream is not frozen."""
        if span is None:
            held = self.hold(0, clean, 1.0 - strength)
            return held._replace(frozen=True, frozen_noised=noised) if strength == 1 else held
        inside = self.in_span(*span)
        return self.hold(0, clean, inside + (1 - inside) * (1.0 - strength))

    def append(self, clean: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor,
               attention: torch.Tensor | None = None, marked: bool = False,
               start: torch.Tensor | None = None) -> ConditionedStream:
        """Guiding tokens `clean` (1, K, C) with denoise mask `mask` (1, K, 1) fp32 at `positions` (1, axes, K, 2)
        appended. `marked`: the transformer's keyframe embedding marks them (generated keyframe slots); `start`:
        (1, K, C) their values before noising (None: zeros). `attention`: (K,) fp32 weights in [0, 1] of the
        attention between each new token and the
        latent's own T tokens, both ways; None: 1. The attention weights follow the reference (ltx-core's
        `build_attention_mask`): once any condition weighted its tokens, each group of appended tokens attends
        fully within itself, with its weights to and from the latent's tokens, and not at all (0) to and from
        the groups appended before it; until then (no weights anywhere) every token attends to every token."""
        added = clean.shape[1]
        weights = self.attention
        if attention is not None or weights is not None:
            cross = torch.ones(added) if attention is None else attention
            weights = _grown(weights, self.clean.shape[1], self.tokens, cross.to(self.clean.device), self.clean.dtype)
        return self._replace(clean=torch.cat([self.clean, clean], dim=1),
                             mask=torch.cat([self.denoise_mask(), mask], dim=1),
                             positions=torch.cat([self.positions, positions], dim=2), attention=weights,
                             marked=self._grown_marks(added, marked), initial=self._grown_initial(clean, start))

    def _grown_marks(self, added: int, marked: bool) -> torch.Tensor | None:
        if self.marked is None and not marked:
            return None
        before = self.marked if self.marked is not None else self.clean.new_zeros(1, self.clean.shape[1], 1).float()
        return torch.cat([before, torch.full((1, added, 1), float(marked), device=before.device)], dim=1)

    def _grown_initial(self, clean: torch.Tensor, start: torch.Tensor | None) -> torch.Tensor | None:
        if self.initial is None and start is None:
            return None
        appended = self.clean.shape[1] - self.tokens
        before = self.initial if self.initial is not None else self.clean.new_zeros(1, appended, self.clean.shape[2])
        return torch.cat([before, torch.zeros_like(clean) if start is None else start.to(clean)], dim=1)


def _grown(weights: torch.Tensor | None, existing: int, tokens: int, cross: torch.Tensor,
           dtype: torch.dtype) -> torch.Tensor:
    """The (1, N + K, N + K) fp32 weights after K tokens are appended to N (`existing`, the first `tokens` of them
    the latent's own) with `cross` (K,) weights to and from the latent's tokens, on its device; `weights` None:
    all ones among the N. `cross` is rounded to `dtype`, as the reference builds the weights in the latent's
    dtype."""
    cross = cross.to(dtype).float()
    total = existing + cross.shape[0]
    grown = torch.zeros(1, total, total, device=cross.device)
    grown[:, :existing, :existing] = 1.0 if weights is None else weights
    grown[:, existing:, existing:] = 1.0
    grown[:, :tokens, existing:] = cross[None, None, :]
    grown[:, existing:, :tokens] = cross[None, :, None]
    return grown


class Condition(Protocol):
    """Something held during sampling (an encoded image at a frame, ...): it names the modality it conditions and
    changes that stream's state. Tensors it holds may live anywhere; `apply` brings them to the stream's device."""

    @property
    def modality(self) -> Modality: ...

    def apply(self, stream: ConditionedStream) -> ConditionedStream:
        """`stream` with this condition applied (a new state; the given one is not modified)."""
        ...
