"""What turns a clip's latent into media, as one value: the checkpoint's decoders and vocoder."""

from __future__ import annotations

from typing import NamedTuple

from ltx2_core.model.audio_vae import AudioDecoder, Vocoder
from ltx2_core.model.video_vae import VideoDecoder
from ltx2_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder


class Decoders(NamedTuple):
    """What turns latents into media: the video VAE decoder (convolutional, or LTX-2.5's diffusion decoder; both
    decoded by `decode_video`), the audio VAE decoder (latent -> mel) and the vocoder (mel -> waveform)."""

    video: VideoDecoder | DiffusionVideoDecoder
    audio: AudioDecoder
    vocoder: Vocoder
