"""Synthetic fp8 checkpoints in the layouts LTX-2 files come in, made from a tiny bf16/fp32 one: the block linears
quantised per tensor (round to nearest, scale = amax/448), the rest left as it is."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ltx2_core.quant.fp8 import FP8, quantize
from ltx2_core.quant.policy import BLOCK_LINEARS

PREFIX = "model.diffusion_model."
LAYOUTS = ("official", "comfyui", "comfyui-legacy", "unscaled")
INPUT_SCALE = 0.02  # a static activation scale, as the official files carry one per layer


def quantised_layers(keys) -> list[str]:
    return sorted(k[: -len(".weight")] for k in keys if k.startswith(PREFIX + "transformer_blocks.")
                  and k.endswith(".weight") and k[: -len(".weight")].endswith(BLOCK_LINEARS))


def every_linear(tensors) -> list[str]:
    """Every linear under the DiT's prefix (patchify, AdaLN, caption projection, blocks, proj_out, the text
    connectors), as some fp8_scaled files have it."""
    return sorted(k[: -len(".weight")] for k, t in tensors.items() if k.startswith(PREFIX) and k.endswith(".weight")
                  and t.ndim == 2)


def write_fp8_checkpoint(source: Path, path: Path, layout: str, formats: dict[str, str] | None = None,
                         all_linears: bool = False) -> Path:
    """`source` with its block linears (`all_linears`: every linear under the DiT's prefix) in fp8 as `layout`
    stores them; `formats` overrides the comfy_quant format of some layers (to write files this package must refuse)."""
    with safe_open(str(source), framework="pt") as f:
        tensors, metadata = {k: f.get_tensor(k) for k in f.keys()}, f.metadata()
    for stem in every_linear(tensors) if all_linears else quantised_layers(tensors):
        q, scale = quantize(tensors[stem + ".weight"])
        tensors[stem + ".weight"] = q
        if layout == "unscaled":  # a plain cast: the values must fit fp8 without a scale
            tensors[stem + ".weight"] = (q.float() * scale).to(FP8)
            continue
        if layout == "comfyui-legacy":
            tensors[stem + ".scale_weight"] = scale
            continue
        tensors[stem + ".weight_scale"] = scale
        if layout == "official":
            tensors[stem + ".input_scale"] = torch.tensor(INPUT_SCALE)
        else:
            fmt = (formats or {}).get(stem, "float8_e4m3fn")
            tensors[stem + ".comfy_quant"] = torch.tensor(list(json.dumps({"format": fmt}).encode()), dtype=torch.uint8)
    if layout == "comfyui-legacy":
        tensors[PREFIX + "scaled_fp8"] = torch.empty(0, dtype=FP8)
    save_file(tensors, str(path), metadata=metadata)
    return path
