"""Checkpoint reading: safetensors only, config from metadata, per-component prefixes, validated before loading."""

from ltx2_core.loader.checkpoint import TRANSFORMER_PREFIX, config_metadata, transformer_config, transformer_keys
from ltx2_core.loader.safetensors_file import SafetensorsFile, read_header, read_tensors
from ltx2_core.loader.weights import load_transformer

__all__ = [
    "TRANSFORMER_PREFIX",
    "SafetensorsFile",
    "config_metadata",
    "load_transformer",
    "read_header",
    "read_tensors",
    "transformer_config",
    "transformer_keys",
]
