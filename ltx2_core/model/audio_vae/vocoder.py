"""Vocoder construction and the latent -> waveform convenience (spec §4)."""

from __future__ import annotations

import torch

from ltx2_core.model.audio_vae.bigvgan import VocoderWithBWE
from ltx2_core.model.audio_vae.config import VocoderConfig
from ltx2_core.model.audio_vae.decoder import AudioDecoder
from ltx2_core.model.audio_vae.hifigan import HiFiGAN

Vocoder = HiFiGAN | VocoderWithBWE  # both: mel (B, 2, T, 64) -> waveform (B, 2, S), with `.sample_rate`


def build_vocoder(config: VocoderConfig) -> Vocoder:
    """HiFi-GAN for an LTX-2.0 config, BigVGAN-v2 + bandwidth extension for LTX-2.3; on the current device."""
    return VocoderWithBWE(config) if config.bwe is not None else HiFiGAN(config.generator)


def decode_audio(latent: torch.Tensor, decoder: AudioDecoder, vocoder: Vocoder) -> tuple[torch.Tensor, int]:
    """Normalised audio latent (B, 8, T, 16) -> (waveform (B, 2, S) float32 in [-1, 1], sample rate).

    The latent and the mel spectrogram are moved to each module's device and dtype, so the two may differ (e.g. the
    decoder in bf16 on the GPU, the vocoder in fp32).
    """
    weight = next(decoder.parameters())
    mel = decoder(latent.to(device=weight.device, dtype=weight.dtype))
    weight = next(vocoder.parameters())
    waveform = vocoder(mel.to(device=weight.device, dtype=weight.dtype))
    return waveform.float(), vocoder.sample_rate
