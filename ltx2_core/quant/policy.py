"""The quantisation policy: which of the transformer's linears are quantised, and the user's `fp8` setting.

The releases quantise the blocks' attention projections and feed-forwards (`BLOCK_LINEARS`, ltx-core's fp8 policy);
"quantize" converts those of a bf16 file to `QUANTIZE_TO` at load, and the memory plan counts them in that format.
The setting (the command line's --fp8, the checkpoint loader's `fp8` input), one of FP8_MODES:
* "auto": a quantised file's weights stay in its format, a bf16 file's are kept in the requested dtype;
* "quantize": a bf16 file's block linears become fp8 at load (half the weight memory);
* "dequantize": a quantised file's weights become the requested dtype (default bf16).
"""

from __future__ import annotations

import os

import torch
from torch import nn

from ltx2_core.loader.safetensors_file import read_header
from ltx2_core.quant import low_rank, registry
from ltx2_core.quant.format import WeightFormat, replace_module
from ltx2_core.quant.fp8 import FP8_FORMAT, FP8Linear

FP8_MODES = ("auto", "quantize", "dequantize")
# the block linears the releases quantise: attention projections and feed-forwards (video and audio FF)
BLOCK_LINEARS = (".to_q", ".to_k", ".to_v", ".to_out.0", "ff.net.0.proj", "ff.net.2")
QUANTIZE_TO: WeightFormat = FP8_FORMAT  # what "quantize" makes (FP8Linear.from_linear)


def quantised_linear(name: str) -> bool:
    """Whether the policy quantises the transformer's linear `name` (e.g. `transformer_blocks.3.attn1.to_q`)."""
    return name.startswith("transformer_blocks.") and name.endswith(BLOCK_LINEARS)


def check_mode(mode: str) -> None:
    if mode not in FP8_MODES:
        raise ValueError(f"fp8 must be one of {', '.join(FP8_MODES)}, got {mode!r}")


def check_sharded(mode: str, path: object) -> None:
    """Tensor parallelism cuts the weights as the file stores them, before "quantize" could convert them."""
    if mode == "quantize":
        raise ValueError(f"{path}: fp8='quantize' does not combine with tensor parallelism; load the official "
                         "fp8 file instead (its shards stay fp8), or leave fp8 at auto")


def apply_mode(model: nn.Module, mode: str, dtype: torch.dtype | None) -> None:
    """After loading: "dequantize" and "quantize" convert the loaded weights (see the module docstring)."""
    if mode == "dequantize":
        dequantize_model(model, dtype or torch.bfloat16)
    elif mode == "quantize":
        quantize_blocks(model)


def stores_quantised(mode: str, checkpoint: str | os.PathLike | None) -> bool:
    """Whether the transformer's policy linears will be quantised once loaded with `mode` from `checkpoint` (None:
    the demo model), read from the header alone (the plan then offers no fp8 quantisation); the plan counts the
    stored bytes layer by layer (`memory.weight_layout.file_layers`)."""
    if mode == "quantize":
        return True
    if checkpoint is not None and str(checkpoint).lower().endswith(".gguf"):  # its types: memory.weight_layout
        return mode == "auto"
    return mode == "auto" and checkpoint is not None and registry.detect(read_header(checkpoint)) is not None


def weight_bytes(name: str, count: int, size: int, shard: int = 1, fmt: WeightFormat | None = None) -> int:
    """Bytes of the transformer's parameter `name` of `count` elements of `size` bytes, split over `shard` ranks;
    in `fmt` (with its scales) when given and the policy quantises it."""
    if fmt is not None and name.endswith(".weight") and quantised_linear(name[: -len(".weight")]):
        return fmt.weight_bytes(count // shard)
    return count * size // shard


@torch.no_grad()
def quantize_blocks(model: nn.Module) -> int:
    """Quantises the linears the policy names (BLOCK_LINEARS under `transformer_blocks.`) in place: fp8 at load
    from a bf16 file. Returns how many were quantised."""
    names = [name for name, m in model.named_modules() if type(m) is nn.Linear and quantised_linear(name)]
    for name in names:
        replace_module(model, name, FP8Linear.from_linear(model.get_submodule(name)))
    return len(names)


@torch.no_grad()
def dequantize_model(model: nn.Module, dtype: torch.dtype) -> int:
    """Every quantised layer back to an `nn.Linear` in `dtype` (a tensor-parallel shard keeps its module and loses
    its scales), e.g. for a device without memory pressure; LoRA factors it carries are added to the weight."""
    modules = registry.quantised_modules(model)
    for name, (module, fmt) in modules.items():
        weight = nn.Parameter(low_rank.dense_weight(module, fmt.dequantize(module, dtype)), requires_grad=False)
        if not isinstance(module, nn.Linear):  # a row-parallel shard: dequantised in place
            module.weight = weight
            for scale in fmt.scales:
                setattr(module, scale, None)
            continue
        linear = nn.Linear(module.in_features, module.out_features, module.bias is not None, device="meta")
        linear.weight = weight
        if module.bias is not None:
            linear.bias = nn.Parameter(module.bias.detach().to(dtype), requires_grad=False)
        replace_module(model, name, linear)
    return len(modules)
