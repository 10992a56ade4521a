"""NVFP4 weights as ComfyUI's quantiser stores them (fp4-mixed text encoders and transformers).

Per quantised linear (`comfy_quant` format "nvfp4"):
* `weight`: uint8 (rows16, cols16 / 2), two E2M1 values per byte, the high nibble first; rows and columns padded
  up to multiples of 16;
* `weight_scale`: float8_e4m3fn block scales, one per 16 consecutive values of a row, stored in cuBLAS's blocked
  layout: (rows rounded up to 128, blocks per row rounded up to 4), each 128×4 tile as 512 bytes where row r and
  block column c of the tile sit at byte (r mod 32)·16 + (r div 32)·4 + c;
* `weight_scale_2`: fp32, 0-d, per tensor;  `input_scale` (optional): the static scale of the input for fp4 matmuls.

w[r, 16·b + k] = E2M1(nibble) · weight_scale_2 · weight_scale[r, b].

`NVFP4Linear` keeps the packed bytes. On a device with NVFP4 tensor cores (compute capability ≥ 10.0) its forward
quantises the input to NVFP4 (with `input_scale`, or its amax) and multiplies there (`kitchen.nvfp4_linear`,
ComfyUI's forward); elsewhere it dequantises for that one call. `NVFP4_FORMAT` is its `WeightFormat`: text encoders
and transformers; a LoRA rides beside the bytes and is added per call after the base product (`quant.low_rank`;
`fuse_`, dequantise, add, quantise again with fresh scales, is the once-per-stage alternative bench/quant_lora.py
measures); tensor parallelism is refused (the block scales are tiled).
"""

from __future__ import annotations

import functools
from collections.abc import Collection

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch import nn

from ltx2_core.errors import UnsupportedQuantizationError
from ltx2_core.loader.safetensors_file import SafetensorsFile
from ltx2_core.quant import kitchen, low_rank

E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
BLOCK = 16


def _round_up(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


def packed_shapes(out_features: int, in_features: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(weight shape, block-scale shape) of a stored (out, in) matrix."""
    rows, cols = _round_up(out_features, 16), _round_up(in_features, 16)
    return (rows, cols // 2), (_round_up(rows, 128), _round_up(cols // BLOCK, 4))


@functools.lru_cache(maxsize=64)
def blocked_index(rows: int, blocks: int, device: torch.device = torch.device("cpu")) -> torch.Tensor:
    """For each (row, block) of the plain scale matrix, its position in the flattened blocked layout (made once per
    shape and device; a real tensor even inside a fake-tensor mode, whose fake copy would reach every later call)."""
    with unset_fake_temporarily():
        r = torch.arange(rows, device=device)[:, None]
        c = torch.arange(blocks, device=device)[None, :]
        tiles_per_row = _round_up(blocks, 4) // 4
        tile = (r // 128) * tiles_per_row + c // 4
        return tile * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4


@functools.lru_cache(maxsize=8)
def _e2m1(device: torch.device) -> torch.Tensor:
    with unset_fake_temporarily():  # cached: a real tensor, as blocked_index
        return torch.tensor(E2M1, device=device)


def unpack(weight: torch.Tensor) -> torch.Tensor:
    """uint8 (rows, cols/2) -> the E2M1 codes (rows, cols), high nibble first."""
    return torch.stack([weight >> 4, weight & 0x0F], dim=-1).flatten(-2)


def dequantize_nvfp4(weight: torch.Tensor, block_scales: torch.Tensor, tensor_scale: torch.Tensor,
                     out_features: int, in_features: int, dtype: torch.dtype) -> torch.Tensor:
    """The stored (rows16, cols16/2) bytes -> the (out, in) weight in `dtype`: through comfy-kitchen (ComfyUI's
    kernels) where installed, else with this module's own unpacking (the same values, both in fp32)."""
    if kitchen.available():
        return kitchen.dequantize_nvfp4(weight, block_scales, tensor_scale, dtype)[:out_features, :in_features]
    codes = unpack(weight)  # (rows16, cols16)
    values = _e2m1(weight.device)[codes.long()]
    rows, cols = codes.shape
    plain = block_scales.reshape(-1)[blocked_index(rows, cols // BLOCK, weight.device)].float()
    values = values.reshape(rows, cols // BLOCK, BLOCK) * plain[..., None] * tensor_scale.float()
    return values.reshape(rows, cols)[:out_features, :in_features].to(dtype)


class NVFP4Linear(nn.Linear):
    """An `nn.Linear` stored as NVFP4 (see the module docstring); each forward dequantises the weight."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, input_scale: bool = False,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = in_features, out_features
        weight_shape, scale_shape = packed_shapes(out_features, in_features)
        self.weight = nn.Parameter(torch.empty(weight_shape, dtype=torch.uint8, device=device), requires_grad=False)
        self.register_buffer("weight_scale", torch.empty(scale_shape, dtype=torch.float8_e4m3fn, device=device))
        self.register_buffer("weight_scale_2", torch.ones((), device=device))
        self.register_buffer("input_scale", torch.ones((), device=device) if input_scale else None)
        bias_param = nn.Parameter(torch.empty(out_features, dtype=dtype, device=device), requires_grad=False)
        self.register_parameter("bias", bias_param if bias else None)
        self.matmul: bool | None = None  # None: by device (kitchen.blackwell); True / False forces it
        low_rank.init_low_rank(self)

    @classmethod
    def like(cls, linear: nn.Linear, input_scale: bool = False) -> NVFP4Linear:
        bias = linear.bias
        return cls(linear.in_features, linear.out_features, bias is not None, input_scale=input_scale,
                   device=linear.weight.device, dtype=None if bias is None else bias.dtype)

    def dequantized(self, dtype: torch.dtype) -> torch.Tensor:
        return dequantize_nvfp4(self.weight, self.weight_scale, self.weight_scale_2, self.out_features,
                                self.in_features, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        use = self.matmul if self.matmul is not None else kitchen.available() and kitchen.blackwell(x.device)
        if use and x.dtype in kitchen.OUT_DTYPES:
            return low_rank.add(self, x, kitchen.nvfp4_linear(x, self.weight, self.weight_scale, self.weight_scale_2,
                                                              self.input_scale, bias, self.out_features))
        return low_rank.linear(self, x, self.dequantized(x.dtype), bias)


class Nvfp4Format:
    """ComfyUI's NVFP4 as a `WeightFormat` (see `quant.format`); marked per layer only, as U8 also holds markers."""

    name, label, dtype, by_dtype, weight_only, lora_per_call = "nvfp4", "NVFP4", "U8", False, False, True
    loads = "ComfyUI's nvfp4 (fp4_mixed)"
    scales = ("weight_scale", "weight_scale_2", "input_scale")

    def rename(self, file: SafetensorsFile, keys: dict[str, str]) -> dict[str, str]:
        return keys

    def defaults(self, present: Collection[str]) -> dict[str, float]:
        return {}

    def layer(self, linear: nn.Linear, present: Collection[str], matmul: bool | None = None) -> NVFP4Linear:
        layer = NVFP4Linear.like(linear, "input_scale" in present)
        layer.matmul = matmul
        return layer

    def owns(self, module: nn.Module) -> bool:
        return isinstance(module, NVFP4Linear)

    def dequantize(self, module: nn.Module, dtype: torch.dtype) -> torch.Tensor:
        return module.dequantized(dtype)

    def weight_bytes(self, count: int) -> int:
        return count // 2 + count // BLOCK + 4  # two values a byte, an fp8 scale per block, one fp32 scale

    def shard_scales(self, module: nn.Module) -> dict[str, torch.Tensor | None]:
        raise UnsupportedQuantizationError("nvfp4 weights are not split by tensor parallelism (their block scales "
                                           "are tiled); load a bf16 or fp8 file for a tensor-parallel run")

    def fuse_(self, module: nn.Module, weight: torch.Tensor) -> None:
        kitchen.require(self.label)
        packed, blocks, scale = kitchen.quantize_nvfp4(weight)  # fresh scales: the update may widen them
        module.weight.copy_(packed)
        module.weight_scale.copy_(blocks)
        module.weight_scale_2.copy_(scale)


NVFP4_FORMAT = Nvfp4Format()
