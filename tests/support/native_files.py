"""The tiny LTX-2.3 bundle as ComfyUI's own LTX-2 loaders read it (Load Checkpoint, Load Diffusion Model, Load LTXV
Audio VAE), for the interop tests: the same key layout and metadata as `support.checkpoints`, with the two things
ComfyUI 0.26.0 takes from the released files rather than from the metadata:
* 128 learnable registers per connector (its `Embeddings1DConnector` hard-codes the released count);
* the released audio VAE section's encoder fields (`in_channels`, `double_z`, the STFT `filter_length`), which its
  audio VAE builds its encoder from."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_transformer

from support.checkpoints import checkpoint_metadata, other_components

NATIVE_REGISTERS = 128  # ComfyUI 0.26.0 comfy/ldm/lightricks/embeddings_connector.py: num_learnable_registers=128


def write_native_checkpoint(path: Path, seed: int = 0) -> Path:
    """The tiny 2.3 bundle (transformer seed `seed`) with 128 registers and the released audio VAE fields."""
    config = TransformerConfig.tiny("2.3")
    tensors = {"model.diffusion_model." + k: v.contiguous() for k, v in demo_transformer(config, seed=seed).state_dict().items()}
    tensors |= other_components(config.version)
    generator = torch.Generator().manual_seed(23)
    for key in [k for k in tensors if k.endswith("embeddings_connector.learnable_registers")]:
        tensors[key] = torch.rand(NATIVE_REGISTERS, tensors[key].shape[1], generator=generator) * 2 - 1
    sections = json.loads(checkpoint_metadata(config, "2.3.0")["config"])
    sections["transformer"]["connector_num_learnable_registers"] = NATIVE_REGISTERS
    audio_vae = sections["audio_vae"]
    audio_vae["model"]["params"]["ddconfig"] |= {"in_channels": 2, "double_z": True}
    audio_vae["preprocessing"]["stft"]["filter_length"] = 1024
    save_file(tensors, str(path), metadata={"config": json.dumps(sections), "model_version": "2.3.0"})
    return path
