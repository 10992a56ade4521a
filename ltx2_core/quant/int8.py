"""int8 weights as ComfyUI writes them (`comfy_quant` format "int8_tensorwise", comfy-kitchen's
`TensorWiseINT8Layout`), in its three variants, each a `WeightFormat` told apart by the file's scale and marker:
* tensorwise: `weight` int8 (out, in), `weight_scale` fp32 0-d: w = q · s;
* rowwise (per output channel): `weight_scale` fp32 (out, 1): w[r] = q[r] · s[r];
* ConvRot (`"convrot": true`, `"convrot_groupsize": g`, g a power of 4): rowwise int8 of W·H, H the block-diagonal
  normalised Hadamard of size g over the inputs (orthogonal), so y = (x·H)(W·H)ᵀ; dequantised, W = (q · s)·H.

`Int8Linear` keeps the int8 bytes; its forward runs comfy-kitchen's `int8_linear` (the activations quantised per
row on the device, int8 tensor cores: ComfyUI's forward) on CUDA devices of compute capability ≥ 7.5, elsewhere (or
with `matmul=False`) dequantises through comfy-kitchen for that one call and multiplies in the input's dtype. A LoRA
rides beside the int8 bytes and is added per call after the base product (`quant.low_rank`); `fuse_` (dequantise,
add, quantise again with fresh scales) is the once-per-stage alternative bench/quant_lora.py measures. Tensor
parallelism is refused (left for a later increment).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Mapping

import torch
from torch import nn

from ltx2_core.errors import UnsupportedQuantizationError
from ltx2_core.loader.safetensors_file import SafetensorsFile
from ltx2_core.quant import kitchen, low_rank

# regular Hadamard sizes (powers of 4); ComfyUI's default is 256, and quantisers pick the largest that divides a
# layer's inputs (musubi-tuner#1025), so a file may mix them
CONVROT_GROUPS = (4, 16, 64, 256, 1024)


@functools.cache
def _int8_cores(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (7, 5)


class Int8Linear(nn.Linear):
    """An `nn.Linear` stored as int8 (see the module docstring): `rows` selects per-row scales, `convrot` the
    Hadamard group size (0: none); `matmul` None picks the int8 matmul by device, True/False forces it."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, rows: bool = False,
                 convrot: int = 0, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = in_features, out_features
        self.rows, self.convrot = rows or bool(convrot), convrot
        self.weight = nn.Parameter(torch.empty(out_features, in_features, dtype=torch.int8, device=device),
                                   requires_grad=False)
        scale_shape = (out_features, 1) if self.rows else ()
        self.register_buffer("weight_scale", torch.ones(scale_shape, device=device))
        bias_param = nn.Parameter(torch.empty(out_features, dtype=dtype, device=device), requires_grad=False)
        self.register_parameter("bias", bias_param if bias else None)
        self.matmul: bool | None = None
        low_rank.init_low_rank(self)

    @classmethod
    def like(cls, linear: nn.Linear, rows: bool = False, convrot: int = 0) -> Int8Linear:
        bias = linear.bias
        return cls(linear.in_features, linear.out_features, bias is not None, rows=rows, convrot=convrot,
                   device=linear.weight.device, dtype=None if bias is None else bias.dtype)

    def dequantized(self, dtype: torch.dtype) -> torch.Tensor:
        return kitchen.dequantize_int8(self.weight, self.weight_scale, dtype, self.convrot)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        use = self.matmul if self.matmul is not None else _int8_cores(x.device)
        if use and x.dtype in kitchen.OUT_DTYPES:
            return low_rank.add(self, x, kitchen.int8_linear(x, self.weight, self.weight_scale, bias, self.convrot))
        return low_rank.linear(self, x, self.dequantized(x.dtype), bias)


def _convrot(conf: Mapping) -> int:
    """The ConvRot group size a comfy_quant entry declares (0: none), as ComfyUI's loader reads it."""
    params = conf.get("params") if isinstance(conf.get("params"), dict) else {}
    if not conf.get("convrot", params.get("convrot", False)):
        return 0
    return int(conf.get("convrot_groupsize", params.get("convrot_groupsize", 256)))


class Int8Format:
    """One int8 variant as a `WeightFormat` (see `quant.format`); marked per layer only (`comfy_quant`)."""

    name, dtype, by_dtype, weight_only, lora_per_call = "int8_tensorwise", "I8", False, False, True
    scales = ("weight_scale",)

    def __init__(self, rows: bool, convrot: int = 0) -> None:
        self.rows, self.convrot = rows or bool(convrot), convrot
        self.label = f"int8 ConvRot/{convrot}" if convrot else "int8 rowwise" if rows else "int8 tensorwise"
        self.loads = "ComfyUI's " + ("int8 ConvRot (groups of 4 to 1024)" if convrot else self.label) + \
            " through comfy-kitchen"

    def declares(self, conf: Mapping, scale_shape: tuple[int, ...] | None) -> bool:
        """Whether a layer marked `conf` with a stored `weight_scale` of `scale_shape` is this variant."""
        rows = scale_shape is not None and math.prod(scale_shape) > 1
        return _convrot(conf) == self.convrot and rows == self.rows

    def rename(self, file: SafetensorsFile, keys: dict[str, str]) -> dict[str, str]:
        return keys

    def defaults(self, present: Collection[str]) -> dict[str, float]:
        return {}

    def layer(self, linear: nn.Linear, present: Collection[str], matmul: bool | None = None) -> Int8Linear:
        kitchen.require(self.label, "dequantize_int8_convrot_weight" if self.convrot else None)
        if self.convrot and linear.in_features % self.convrot:
            raise UnsupportedQuantizationError(f"{self.label}: the group size does not divide the layer's "
                                               f"{linear.in_features} inputs; the file is not a valid ConvRot file")
        layer = Int8Linear.like(linear, self.rows, self.convrot)
        layer.matmul = matmul
        return layer

    def owns(self, module: nn.Module) -> bool:
        return isinstance(module, Int8Linear) and (module.rows, module.convrot) == (self.rows, self.convrot)

    def dequantize(self, module: nn.Module, dtype: torch.dtype) -> torch.Tensor:
        return module.dequantized(dtype)

    def weight_bytes(self, count: int) -> int:
        # one byte a weight; a 4-byte scale per row bounded by count / 1024 (the policy's rows have ≥ 4096 inputs)
        return count + (max(4, count // 1024) if self.rows else 4)

    def shard_scales(self, module: nn.Module) -> dict[str, torch.Tensor | None]:
        raise UnsupportedQuantizationError(f"{self.label} weights are not split by tensor parallelism yet; load a "
                                           "bf16 or fp8 file for a tensor-parallel run")

    def fuse_(self, module: nn.Module, weight: torch.Tensor) -> None:
        q, scale = kitchen.quantize_int8(weight, self.rows, self.convrot)  # fresh scales: the update may widen them
        module.weight.copy_(q)
        module.weight_scale.copy_(scale.reshape(module.weight_scale.shape))


INT8_TENSORWISE = Int8Format(rows=False)
INT8_ROWWISE = Int8Format(rows=True)
INT8_CONVROT = tuple(Int8Format(rows=True, convrot=g) for g in CONVROT_GROUPS)
