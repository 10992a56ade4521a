"""An audio reference (Dub-It's voice and sound to keep), as ltx-pipelines 1.2.0's `DubItPipeline` builds it
(`patchify_dubit_audio_reference_latent` with negative positions, ltx-core's `AudioConditionByReferenceLatent`).

A sound's audio VAE latent (1, 8, T, 16) becomes T guiding tokens appended after the audio stream's own tokens (a
`Condition` of the audio stream, `EncodedAudioReference`): their values the latent's tokens, denoise mask
1 − strength (1: kept clean), and their positions the sound's own latent time bounds in seconds shifted so the last
token ends 0.04 s before 0 (every position negative: the reference lies before the generated clip, which starts at
0). They attend to every token and are attended by every token (no attention weights), and are dropped after the
last step. Unlike `EncodedAudio` (a sound held *over* the clip's own tokens), nothing of the clip's audio is held.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ltx2_core.conditioning.stream import AUDIO, ConditionedStream
from ltx2_core.geometry import audio_positions, patchify_audio

REFERENCE_GAP = 0.04  # seconds between the reference's last token end and the clip's start (1.2.0's constant)


def reference_positions(tokens: int, device: torch.device | str | None = None) -> torch.Tensor:
    """(1, 1, T, 2) fp32 [start, end) seconds of a reference sound of `tokens` audio latents: its own latent time
    bounds minus (the last end + 0.04), so it ends 0.04 s before the clip starts (1.2.0's
    `patchify_dubit_audio_reference_latent(negative_positions=True)`, computed in the same order)."""
    positions = audio_positions(tokens, device)
    end = positions[:, :, -1, 1].max().item()  # once, at set-up: a host read of a CPU-sized table, not per step
    return positions - end - REFERENCE_GAP


class EncodedAudioReference(NamedTuple):
    """A reference sound's audio latent (1, 8, T, 16) appended to the audio stream as T guiding tokens at negative
    times (module docstring), with `strength` (1: kept clean, 0: denoised with the rest)."""

    latent: torch.Tensor
    strength: float = 1.0
    modality = AUDIO

    def apply(self, stream: ConditionedStream) -> ConditionedStream:
        device = stream.clean.device
        tokens = patchify_audio(self.latent.to(device=device, dtype=stream.clean.dtype))
        positions = reference_positions(tokens.shape[1], device)
        # the reference builds the mask in the latent's dtype (bf16 in real runs)
        mask = torch.full((1, tokens.shape[1], 1), 1.0 - self.strength, dtype=tokens.dtype, device=device).float()
        return stream.append(tokens, mask, positions)
