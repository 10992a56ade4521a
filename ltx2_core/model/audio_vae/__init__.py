"""Audio VAE encoder (waveform -> log-mel -> latent), decoder (latent -> log-mel) and vocoders (log-mel -> waveform) of LTX-2, with the checkpoint's names."""

from ltx2_core.model.audio_vae.bigvgan import BigVGAN, VocoderWithBWE
from ltx2_core.model.audio_vae.config import (
    AudioDecoderConfig,
    BandwidthExtensionConfig,
    GeneratorConfig,
    VocoderConfig,
)
from ltx2_core.model.audio_vae.decoder import AudioDecoder
from ltx2_core.model.audio_vae.encoder import AudioEncoder, AudioEncoderConfig, encode_audio
from ltx2_core.model.audio_vae.hifigan import HiFiGAN
from ltx2_core.model.audio_vae.vocoder import Vocoder, build_vocoder, decode_audio

__all__ = [
    "AudioDecoder",
    "AudioDecoderConfig",
    "AudioEncoder",
    "AudioEncoderConfig",
    "BandwidthExtensionConfig",
    "BigVGAN",
    "GeneratorConfig",
    "HiFiGAN",
    "Vocoder",
    "VocoderConfig",
    "VocoderWithBWE",
    "build_vocoder",
    "decode_audio",
    "encode_audio",
]
