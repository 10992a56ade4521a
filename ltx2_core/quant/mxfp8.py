"""MXFP8 weights as ComfyUI writes them (`comfy_quant` format "mxfp8", comfy-kitchen's `TensorCoreMXFP8Layout`):
* `weight`: float8_e4m3fn (rows32, cols32), the (out, in) matrix zero-padded to multiples of 32;
* `weight_scale`: E8M0 block scales (F8_E8M0, or U8 bytes: a power of two 2^(e − 127)), one per 32 consecutive
  values of a row, in cuBLAS's swizzled layout (rows32 rounded up to 128, blocks rounded up to 4);
* `input_scale` (optional) is kept and unused.

w[r, 32·b + k] = q[r, 32·b + k] · 2^(e[r, b] − 127).

`MXFP8Linear` keeps the fp8 bytes. On a device with MXFP8 tensor cores (compute capability ≥ 10.0) its forward
quantises the input to MXFP8 and multiplies there (`kitchen.mxfp8_linear`, ComfyUI's forward); elsewhere it
dequantises through comfy-kitchen for that one call. A LoRA rides beside the bytes and is added per call after
the base product (`quant.low_rank`); `fuse_` (dequantise, add, quantise again) is the once-per-stage alternative
bench/quant_lora.py measures. Tensor parallelism is refused (the block scales are tiled).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import torch
from torch import nn

from ltx2_core.errors import UnsupportedQuantizationError
from ltx2_core.loader.safetensors_file import SafetensorsFile
from ltx2_core.quant import kitchen, low_rank

BLOCK = 32


def _round_up(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


def packed_shapes(out_features: int, in_features: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(weight shape, block-scale shape) of a stored (out, in) matrix."""
    rows, cols = _round_up(out_features, BLOCK), _round_up(in_features, BLOCK)
    return (rows, cols), (_round_up(rows, 128), _round_up(cols // BLOCK, 4))


class MXFP8Linear(nn.Linear):
    """An `nn.Linear` stored as MXFP8 (see the module docstring); each forward dequantises the weight."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, input_scale: bool = False,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = in_features, out_features
        weight_shape, scale_shape = packed_shapes(out_features, in_features)
        self.weight = nn.Parameter(torch.empty(weight_shape, dtype=torch.float8_e4m3fn, device=device),
                                   requires_grad=False)
        self.register_buffer("weight_scale", torch.empty(scale_shape, dtype=torch.float8_e8m0fnu, device=device))
        self.register_buffer("input_scale", torch.ones((), device=device) if input_scale else None)
        bias_param = nn.Parameter(torch.empty(out_features, dtype=dtype, device=device), requires_grad=False)
        self.register_parameter("bias", bias_param if bias else None)
        self.matmul: bool | None = None  # None: by device (kitchen.blackwell); True / False forces it
        low_rank.init_low_rank(self)

    @classmethod
    def like(cls, linear: nn.Linear, input_scale: bool = False) -> MXFP8Linear:
        bias = linear.bias
        return cls(linear.in_features, linear.out_features, bias is not None, input_scale=input_scale,
                   device=linear.weight.device, dtype=None if bias is None else bias.dtype)

    def dequantized(self, dtype: torch.dtype) -> torch.Tensor:
        return kitchen.dequantize_mxfp8(self.weight, self.weight_scale, dtype)[: self.out_features,
                                                                               : self.in_features]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        use = self.matmul if self.matmul is not None else kitchen.blackwell(x.device)
        if use and x.dtype in kitchen.OUT_DTYPES:
            return low_rank.add(self, x, kitchen.mxfp8_linear(x, self.weight, self.weight_scale, bias,
                                                              self.out_features))
        return low_rank.linear(self, x, self.dequantized(x.dtype), bias)


class Mxfp8Format:
    """ComfyUI's MXFP8 as a `WeightFormat` (see `quant.format`); marked per layer only (its weights are F8_E4M3,
    the dtype of plain fp8)."""

    name, label, dtype, by_dtype, weight_only, lora_per_call = "mxfp8", "MXFP8", "F8_E4M3", False, False, True
    loads = "ComfyUI's mxfp8 (E8M0 block scales, through comfy-kitchen)"
    scales = ("weight_scale", "input_scale")

    def declares(self, conf: Mapping, scale_shape: tuple[int, ...] | None) -> bool:
        return True

    def rename(self, file: SafetensorsFile, keys: dict[str, str]) -> dict[str, str]:
        return keys

    def defaults(self, present: Collection[str]) -> dict[str, float]:
        return {}

    def layer(self, linear: nn.Linear, present: Collection[str], matmul: bool | None = None) -> MXFP8Linear:
        kitchen.require(self.label)
        layer = MXFP8Linear.like(linear, "input_scale" in present)
        layer.matmul = matmul
        return layer

    def owns(self, module: nn.Module) -> bool:
        return isinstance(module, MXFP8Linear)

    def dequantize(self, module: nn.Module, dtype: torch.dtype) -> torch.Tensor:
        return module.dequantized(dtype)

    def weight_bytes(self, count: int) -> int:
        return count + count // BLOCK  # one byte a weight, one E8M0 byte a block (padding not counted)

    def shard_scales(self, module: nn.Module) -> dict[str, torch.Tensor | None]:
        raise UnsupportedQuantizationError("MXFP8 weights are not split by tensor parallelism (their block scales "
                                           "are tiled); load a bf16 or fp8 file for a tensor-parallel run")

    def fuse_(self, module: nn.Module, weight: torch.Tensor) -> None:
        q, scales = kitchen.quantize_mxfp8(weight)  # fresh block scales: the update may widen them
        module.weight.copy_(q)
        module.weight_scale.copy_(scales.view(module.weight_scale.dtype))


MXFP8_FORMAT = Mxfp8Format()
