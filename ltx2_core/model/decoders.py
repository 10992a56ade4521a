"""What turns a clip's latent into media, as one value: the checkpoint's decoders and vocoder."""

from __future__ import annotations

from typing import NamedTuple

from ltx2_core.model.audio_vae import AudioDecoder, Vocoder
from ltx2_core.model.video_vae import VideoDecoder


class Decoders(NamedTuple):
    """What turns latents into media: the video VAE decoder, the audio VAE decoder (latent -> mel) and the vocoder
    (mel -> waveform)."""

    video: VideoDecoder
    audio: AudioDecoder
    vocoder: Vocoder
