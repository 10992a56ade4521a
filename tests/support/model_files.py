"""Small model files of the kinds a user drops into ComfyUI's folders: an x2 upsampler and a LoRA for the tiny
transformers, written as real safetensors in the official layouts."""

from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import save_file

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_lora, demo_transformer, demo_upsampler


def write_upsampler(path: Path, version: str = "2.0", seed: int = 3) -> Path:
    """The demo's x2 upsampler with its `config` metadata."""
    upsampler = demo_upsampler(version, seed=seed)
    save_file({k: v.contiguous() for k, v in upsampler.state_dict().items()}, str(path),
              metadata={"config": json.dumps(upsampler.config.to_metadata())})
    return path


def write_lora(path: Path, seed: int, version: str = "2.0", metadata: dict[str, str] | None = None) -> Path:
    """A random LoRA on every block linear of the tiny transformer, in ComfyUI's layout (`diffusion_model.` +
    lora_A / lora_B), with the file metadata `metadata` (an IC-LoRA's reference_downscale_factor, ...)."""
    lora = demo_lora(demo_transformer(TransformerConfig.tiny(version)), seed=seed)
    tensors = {}
    for target, pair in lora.pairs.items():
        stem = "diffusion_model." + target[: -len(".weight")]
        tensors[stem + ".lora_A.weight"], tensors[stem + ".lora_B.weight"] = pair.down, pair.up
    save_file(tensors, str(path), metadata=metadata)
    return path
