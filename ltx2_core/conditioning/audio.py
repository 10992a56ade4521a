"""Audio conditioning (audio-to-video: lip-sync to a voice, a music video from a song), as the reference's
`A2VidPipelineTwoStage` does it (ltx-pipelines 1.0.0 and 1.2.0).

The sound (a file, or a waveform in memory) is cut to [start, start + clip duration) at its own rate, encoded by the
audio VAE encoder (resampled to the model's rate, log-mel, encoder; `ltx2_core.model.audio_vae.encode_audio`) and
the latent cut to the clip's audio latent length. As a `Condition` of the audio stream (`EncodedAudio`) it holds
every audio token at that latent with denoise mask 1 − strength: strength 1 keeps the audio exactly (the
reference's frozen audio: timesteps 0, the prediction replaced by the clean latent, and for LTX-2.5 the stream's
sigma fed as 0 as 1.2.0 feeds a frozen modality, `Release.frozen_sigma_zero`), lower lets the model change it. The reference holds it in both stages (its docstrings say stage 2 refines the audio; its code does not), and
so do we. The generated file carries the input waveform over the clip, never a re-decoded copy.
"""

from __future__ import annotations

import math
import os
from typing import NamedTuple

import torch

from ltx2_core.audio_io import Waveform, read_audio
from ltx2_core.conditioning.stream import AUDIO, ConditionedStream
from ltx2_core.geometry import patchify_audio


class AudioCondition(NamedTuple):
    """A sound to generate the video to: `audio` is a file path (any format PyAV reads; a video file's first audio
    stream) or a `Waveform` (samples (C, S), rate); read from `start` seconds for the clip's duration, held with
    `strength` (1: exactly, as the reference; 0: not at all)."""

    audio: str | os.PathLike | Waveform
    start: float = 0.0
    strength: float = 1.0

    @property
    def name(self) -> str:
        return "the audio waveform" if isinstance(self.audio, Waveform) else f"audio {os.fspath(self.audio)}"

    def check(self, seconds: float) -> Waveform:
        """The clip [start, start + seconds) of the sound, sample-exact at its own rate; ValueError naming the fix
        for a bad value, before any model work (a file is read here)."""
        if not isinstance(self.strength, (int, float)) or isinstance(self.strength, bool) \
                or not 0 <= self.strength <= 1:
            raise ValueError(f"audio strength must be in [0, 1] (1 holds the sound exactly), got {self.strength!r}")
        if not isinstance(self.start, (int, float)) or isinstance(self.start, bool) or not math.isfinite(self.start) \
                or self.start < 0:
            raise ValueError(f"audio start must be a time in seconds ≥ 0, got {self.start!r}")
        if isinstance(self.audio, Waveform):
            whole = self.audio.checked(self.name)
            sound = whole.clip(self.start, seconds)
            length = whole.seconds
        else:
            sound = read_audio(self.audio, self.start, seconds)
            length = self.start + sound.seconds  # a short clip was read to the file's end: exact, nothing re-read
        if sound.samples.shape[-1] < round(seconds * sound.rate):
            raise ValueError(f"{self.name} lasts {length:.3f} s; from {self.start:g} s the clip needs {seconds:.3f} "
                             "s; use a longer sound, an earlier start, or fewer frames")
        peak = float(sound.samples.abs().max())
        if peak > 1:  # the clip is written as it is, and the mp4 holds samples in [-1, 1]: refused now, not then
            raise ValueError(f"{self.name} peaks at {peak:.3f} over the clip, above full scale (1.0); lower its "
                             "volume or normalise it")
        return sound


class EncodedAudio(NamedTuple):
    """An encoded sound held over the whole clip (a `Condition` of the audio stream): latent (1, 8, T, 16) with
    T the clip's audio latent length, and its strength. `span` (start, end) seconds: the audio latents meeting
    [start, end) are regenerated from noise and only the others held (a retake); the stream is then not frozen.
    `retake`: the clip's own sound, held by a retake (`RetakePipeline`: frozen, it is noised first where the
    release's reference does, `Release.frozen_noised`, and the stage keeps its audio guidance); False: a sound the
    video is generated to (`A2VidPipelineTwoStage`: held clean, the audio not guided, `sampling.recipe`)."""

    latent: torch.Tensor
    strength: float
    span: tuple[float, float] | None = None
    retake: bool = False
    modality = AUDIO

    def apply(self, stream: ConditionedStream) -> ConditionedStream:
        tokens = patchify_audio(self.latent.to(device=stream.clean.device, dtype=stream.clean.dtype))
        if tokens.shape[1] != stream.tokens:
            raise ValueError(f"the encoded audio has {tokens.shape[1]} latent frames and the clip {stream.tokens}; "
                             "encode it for this clip's frames and frame rate")
        return stream.hold_clip(tokens, self.strength, self.span, noised=self.retake)  # strength 1, no span: frozen


def held_sound(conditions) -> EncodedAudio | None:
    """The sound `conditions` generate the video to (audio to video; not a retake's own sound), or None."""
    return next((c for c in conditions if isinstance(c, EncodedAudio) and not c.retake), None)


def holds_sound(conditions) -> bool:
    """Whether `conditions` hold the audio stream exactly at a sound the video is generated to (strength 1): the
    sampled audio latent is then the sound's own, and the sound itself is what the clip is written with."""
    sound = held_sound(conditions)
    return sound is not None and sound.strength == 1 and sound.span is None


@torch.no_grad()
def encode_audio_condition(condition: AudioCondition, encoder: torch.nn.Module, seconds: float,
                           latent_frames: int) -> tuple[EncodedAudio, Waveform]:
    """The condition's clip encoded and cut to `latent_frames`, and the clip's waveform (what the video is
    written with)."""
    from ltx2_core.model.audio_vae import encode_audio

    sound = condition.check(seconds)
    latent = encode_audio(sound.samples, sound.rate, encoder)[:, :, :latent_frames]
    if latent.shape[2] < latent_frames:
        raise ValueError(f"{condition.name} encodes to {latent.shape[2]} audio latent frames and the clip needs "
                         f"{latent_frames}; use a longer sound")
    return EncodedAudio(latent, float(condition.strength)), sound
