"""Continuation: a window of a long video holds, in place, the latent frames it shares with the window before it
(`ltx2_core.long_video`; the plan of the windows in `ltx2_core.windows`).

A `Continuation` holds latent frames [start, start + n) of its stream at the previous window's sampled values with
denoise mask 0, as a retake holds the tokens outside its span (`conditioning.retake`): per-token timestep 0, the
prediction replaced by the held value at every step, so the window's sampled latent carries them as an exact copy.
Video: n latent frames (every row and column of each); audio: n audio latents (each 128 features). The window's
latent frame 0 (video) and audio latent 0 are never held: both are causal (one pixel frame, one 10 ms mel frame)
and cannot stand for a full frame of the previous window; the window generates them and the join drops them.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ltx2_core.conditioning.stream import AUDIO, VIDEO, ConditionedStream, Modality
from ltx2_core.geometry import patchify_audio, patchify_video


class Continuation(NamedTuple):
    """Frames of the previous window held exactly (a `Condition` of `modality`'s stream): `latent` video
    (1, 128, n, H', W') or audio (1, 8, n, 16), held at the window's latent frames [start, start + n), start ≥ 1."""

    modality: Modality
    latent: torch.Tensor
    start: int

    @property
    def frames(self) -> int:
        """n: the latent frames (video) or audio latents held."""
        return self.latent.shape[2]

    def apply(self, stream: ConditionedStream) -> ConditionedStream:
        if self.modality not in (VIDEO, AUDIO):
            raise ValueError(f"a continuation holds the video or the audio stream, got {self.modality!r}")
        latent = self.latent.to(device=stream.clean.device, dtype=stream.clean.dtype)
        tokens = patchify_video(latent) if self.modality == VIDEO else patchify_audio(latent)
        per_frame = tokens.shape[1] // self.frames
        first, end = self.start * per_frame, (self.start + self.frames) * per_frame
        if self.start < 1 or end > stream.tokens or stream.tokens % per_frame:
            raise ValueError(f"the {self.modality} continuation holds latent frames [{self.start}, "
                             f"{self.start + self.frames}) of {per_frame} tokens each, and the window has "
                             f"{stream.tokens} tokens; plan the windows with ltx2_core.windows (frame 0 stays free)")
        return stream.hold(first, tokens, 0.0)
