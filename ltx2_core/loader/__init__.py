"""Checkpoint reading: safetensors only, config from metadata, each component's file and prefix from `Sources` (a
bundle or separate files), validated before loading."""

from ltx2_core.loader.audio_weights import load_audio_decoder, load_audio_encoder, load_vocoder
from ltx2_core.loader.lora import Lora, LoraError, fuse_loras, fused_loras, load_lora
from ltx2_core.loader.checkpoint import TRANSFORMER_PREFIX, config_metadata, transformer_config, transformer_keys
from ltx2_core.loader.safetensors_file import SafetensorsFile, read_header, read_tensors
from ltx2_core.loader.sources import Component, Source, Sources
from ltx2_core.loader.upsampler_weights import load_upsampler
from ltx2_core.loader.vae_weights import load_video_decoder, load_video_encoder
from ltx2_core.loader.transformer import load_transformer

__all__ = [
    "TRANSFORMER_PREFIX",
    "Component",
    "Lora",
    "LoraError",
    "SafetensorsFile",
    "Source",
    "Sources",
    "config_metadata",
    "fuse_loras",
    "fused_loras",
    "load_audio_decoder",
    "load_audio_encoder",
    "load_lora",
    "load_transformer",
    "load_upsampler",
    "load_video_decoder",
    "load_video_encoder",
    "load_vocoder",
    "read_header",
    "read_tensors",
    "transformer_config",
    "transformer_keys",
]
