"""Tiny transformers wide enough for every quantised format (rows of whole 256-weight K blocks, ConvRot groups of
256), written as the public conversions write them: a GGUF by the conversion's type rule
(`memory.weight_layout.GgufMix`) and a ComfyUI int8 / MXFP8 / fp8 safetensors file (comfy-kitchen's quantisers, the
`comfy_quant` marker of comfy/ops.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn

from ltx2_core import TransformerConfig
from ltx2_core.model.transformer.config import StreamConfig
from ltx2_core.quant.policy import quantised_linear

from support.gguf_files import write_gguf as write_gguf_state
from support.gguf_quantise import quantise_k

WIDTH = 256  # both streams: heads 2 × 128; the feed-forwards 1,024


def wide_tiny(version: str = "2.3", num_layers: int = 2) -> TransformerConfig:
    """The tiny structure of `version` with 256-wide streams (caption 256 where the release has one)."""
    config = TransformerConfig.tiny(version, num_layers)
    stream = dict(heads=2, head_dim=WIDTH // 2, context_dim=WIDTH, in_channels=128, out_channels=128)
    return dataclasses.replace(config, video=StreamConfig(**stream, max_pos=(20, 2048, 2048)),
                               audio=StreamConfig(**stream, max_pos=(20,)),
                               caption_channels=None if config.caption_channels is None else WIDTH)


def write_gguf(path: Path, model: nn.Module, mix, prefix: str = "") -> dict[str, str]:
    """`model`'s state as a GGUF of `mix` (a `GgufMix`): each tensor in the type the mix gives it
    (`GgufMix.tensor_types`: the conversion's BF16 / F32 for what llama-quantize keeps, block types for the rest);
    quantised by the `gguf` package where it has a quantiser, else (the K types) by `support.gguf_quantise`. -> each
    tensor's type name."""
    import gguf

    state = model.state_dict()
    types = mix.tensor_types({name: tuple(value.shape) for name, value in state.items()})
    kinds = {name: gguf.GGMLQuantizationType[kind.name] for name, kind in types.items()}
    stored = write_gguf_state(str(path), state, prefix=prefix, kind=lambda name, _: kinds[name], quantize=_quantise)
    return {name: kind.name for name, kind in stored.items()}


def _quantise(data: np.ndarray, kind) -> np.ndarray:
    import gguf

    try:
        return gguf.quants.quantize(data, kind)
    except NotImplementedError:
        return quantise_k(data, kind.name)


def comfy_quantised(weight: torch.Tensor, fmt: str) -> tuple[dict[str, torch.Tensor], dict]:
    """(the tensors beside `.weight` and the `comfy_quant` entry) of an (out, in) weight as ComfyUI's quantiser
    stores `fmt`: int8_tensorwise, int8_rowwise, int8_convrot (groups of 256), mxfp8, nvfp4 or float8_e4m3fn."""
    import comfy_kitchen as ck

    eager = ck.backends.eager.quantization
    w = weight.float()
    if fmt in ("int8_tensorwise", "int8_rowwise"):
        q, s = (eager.quantize_int8_tensorwise if fmt == "int8_tensorwise" else eager.quantize_int8_rowwise)(w)
        return {"weight": q, "weight_scale": s}, {"format": "int8_tensorwise"}
    if fmt == "int8_convrot":
        q, s = eager.quantize_int8_convrot_weight(w, 256)
        return {"weight": q, "weight_scale": s}, {"format": "int8_tensorwise", "convrot": True,
                                                  "convrot_groupsize": 256}
    if fmt == "mxfp8":
        q, s = eager.quantize_mxfp8(w, pad_32x=w.shape[0] % 32 != 0 or w.shape[1] % 32 != 0)
        return {"weight": q, "weight_scale": s}, {"format": "mxfp8"}
    if fmt == "nvfp4":
        tensor_scale = (w.abs().amax() / (6 * 448)).float()
        q, s = eager.quantize_nvfp4(w, tensor_scale, pad_16x=w.shape[0] % 16 != 0 or w.shape[1] % 16 != 0)
        return {"weight": q, "weight_scale": s, "weight_scale_2": tensor_scale}, {"format": "nvfp4"}
    scale = (w.abs().amax() / 448).float()
    return {"weight": eager.quantize_per_tensor_fp8(w, scale), "weight_scale": scale}, {"format": "float8_e4m3fn"}


def write_comfy_file(path: Path, model: nn.Module, fmt: str, dtype: torch.dtype = torch.bfloat16) -> set[str]:
    """`model` as a ComfyUI-quantised bundle (the DiT under `model.diffusion_model.` beside the tiny checkpoints'
    other components, the config in the metadata) with the policy's block linears in `fmt` (`comfy_quantised`),
    each marked by a `comfy_quant` tensor; -> the quantised layers."""
    from support.checkpoints import MODEL_VERSIONS, checkpoint_metadata, other_components

    tensors, layers = {}, set()
    for name, value in model.state_dict().items():
        module = name.rsplit(".", 1)[0]
        if name.endswith(".weight") and quantised_linear(module):
            stored, conf = comfy_quantised(value, fmt)
            tensors |= {f"model.diffusion_model.{module}.{k}": v.contiguous() for k, v in stored.items()}
            tensors[f"model.diffusion_model.{module}.comfy_quant"] = torch.tensor(
                list(json.dumps(conf).encode("utf-8")), dtype=torch.uint8)
            layers.add(module)
        else:
            tensors[f"model.diffusion_model.{name}"] = value.detach().to(dtype).contiguous()
    tensors |= other_components(model.config.version)
    save_file(tensors, str(path), metadata=checkpoint_metadata(model.config, MODEL_VERSIONS[model.config.version]))
    return layers
