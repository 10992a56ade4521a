"""fp8 weights: `float8_e4m3fn` storage with a per-tensor fp32 dequantisation scale, w ≈ q · weight_scale, the
layout of the official LTX-2 fp8 checkpoints and of ComfyUI's fp8_scaled files; `FP8_FORMAT` is its `WeightFormat`.

`FP8Linear` keeps its weight in fp8 (half the bytes of bf16). Its forward multiplies by an fp8 matmul recipe
(`quant.fp8_matmul`: on fp8 tensor cores with `torch._scaled_mm`, the input quantised per tensor or per row on the
device, never read on the host) where the device has them (CUDA compute capability ≥ 8.9) and both matrix sides are
multiples of 16; elsewhere (CPU, Ampere, odd shapes) it dequantises the weight for that one call (through comfy-kitchen,
ComfyUI's kernel library, where installed: `quant.kitchen`). A LoRA is fused by
dequantising, adding the update and quantising again with a fresh scale; under tensor parallelism a rank keeps its
slice of the weight in fp8 and the per-tensor scales whole.
"""

from __future__ import annotations

import functools
from collections.abc import Collection

import torch
import torch.nn.functional as F
from torch import nn

from ltx2_core.loader.safetensors_file import SafetensorsFile
from ltx2_core.quant import fp8_matmul, kitchen

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max  # 448
_TINY = torch.finfo(torch.float32).tiny
_LEGACY_MARKER = "scaled_fp8"  # ComfyUI's older fp8 files, with their scales under older names
_LEGACY = {".scale_weight": ".weight_scale", ".scale_input": ".input_scale"}


def quantize(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per tensor, round to nearest: (q in fp8, scale = amax / 448 in fp32, 0-d) with weight ≈ q · scale."""
    w = weight.float()
    scale = (w.abs().amax() / FP8_MAX).clamp(min=_TINY)
    return (w / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


def dequantize(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """q · scale in `dtype` (multiplied in fp32): through comfy-kitchen (ComfyUI's kernels) where installed."""
    if kitchen.available():
        return kitchen.dequantize_fp8(q, scale, dtype)
    return (q.float() * scale.float()).to(dtype)


@functools.lru_cache(maxsize=None)
def _auto_recipe(device: torch.device) -> str:
    return fp8_matmul.auto_recipe(fp8_matmul.device_caps(device))


class FP8Linear(nn.Linear):
    """An `nn.Linear` whose weight is fp8 with a 0-d fp32 `weight_scale` (and, from the official files, a 0-d
    `input_scale`); the bias keeps the compute dtype. `recipe` (a `quant.fp8_matmul.RECIPES` name, set by
    `set_fp8_matmul`) says how it multiplies; without one, `scaled_mm` decides: None the device's "auto" recipe,
    True the per-tensor "tensor" recipe (also on the CPU, where PyTorch has a reference kernel), False dequantise."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, input_scale: bool = False,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features, dtype=FP8, device=device),
                                   requires_grad=False)
        bias_param = nn.Parameter(torch.empty(out_features, dtype=dtype, device=device), requires_grad=False)
        self.register_parameter("bias", bias_param if bias else None)
        self.register_buffer("weight_scale", torch.ones((), device=device))
        self.register_buffer("input_scale", torch.ones((), device=device) if input_scale else None)
        self.scaled_mm: bool | None = None
        self.recipe: str | None = None

    @classmethod
    def like(cls, linear: nn.Linear, input_scale: bool = False) -> FP8Linear:
        """Empty, with `linear`'s shapes, device and bias dtype (e.g. on the meta model before loading)."""
        bias = linear.bias
        return cls(linear.in_features, linear.out_features, bias is not None, input_scale=input_scale,
                   device=linear.weight.device, dtype=None if bias is None else bias.dtype)

    @classmethod
    @torch.no_grad()
    def from_linear(cls, linear: nn.Linear) -> FP8Linear:
        """`linear` quantised (round to nearest, per-tensor scale); the bias is kept as it is."""
        out = cls.like(linear)
        q, scale = quantize(linear.weight)
        out.weight = nn.Parameter(q, requires_grad=False)
        out.weight_scale = scale.to(linear.weight.device)
        if linear.bias is not None:
            out.bias = nn.Parameter(linear.bias.detach(), requires_grad=False)
        return out

    def dequantized(self, dtype: torch.dtype) -> torch.Tensor:
        return dequantize(self.weight, self.weight_scale, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        recipe = self.recipe or ("tensor" if self.scaled_mm else "dequantize" if self.scaled_mm is False else
                                 _auto_recipe(x.device))
        if fp8_matmul.multiplies(recipe, self.in_features, self.out_features):
            return fp8_matmul.linear(x, self.weight, self.weight_scale, self.bias, recipe, self.input_scale)
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, self.dequantized(x.dtype), bias)


class Fp8Format:
    """float8_e4m3fn with per-tensor scales as a `WeightFormat` (see `quant.format`)."""

    name, label, dtype, by_dtype, weight_only, lora_per_call = "float8_e4m3fn", "fp8", "F8_E4M3", True, False, False
    loads = "float8_e4m3fn with per-tensor scales (the official *-fp8 files, ComfyUI's fp8_scaled)"
    scales = ("weight_scale", "input_scale")

    def rename(self, file: SafetensorsFile, keys: dict[str, str]) -> dict[str, str]:
        # the marker sits under the DiT's prefix (a model key) or at the root of a text encoder file
        if keys.pop(_LEGACY_MARKER, None) is None and _LEGACY_MARKER not in file.tensors:
            return keys
        for key in list(keys):
            for old, new in _LEGACY.items():
                if key.endswith(old):
                    keys[key[: -len(old)] + new] = keys.pop(key)
        return keys

    def defaults(self, present: Collection[str]) -> dict[str, float]:
        return {} if "weight_scale" in present else {"weight_scale": 1.0}  # a plain cast: scale 1

    def layer(self, linear: nn.Linear, present: Collection[str], matmul: bool | None = None) -> FP8Linear:
        fp8 = FP8Linear.like(linear, "input_scale" in present)
        fp8.scaled_mm = matmul
        return fp8

    def owns(self, module: nn.Module) -> bool:
        return isinstance(getattr(module, "weight", None), torch.Tensor) and module.weight.dtype == FP8 \
            and getattr(module, "weight_scale", None) is not None and module.weight_scale.dim() == 0  # not MXFP8

    def dequantize(self, module: nn.Module, dtype: torch.dtype) -> torch.Tensor:
        return dequantize(module.weight, module.weight_scale, dtype)

    def weight_bytes(self, count: int) -> int:
        return count + 4  # one byte a weight, one fp32 scale

    def shard_scales(self, module: nn.Module) -> dict[str, torch.Tensor | None]:
        return {"weight_scale": module.weight_scale, "input_scale": getattr(module, "input_scale", None)}

    def fuse_(self, module: nn.Module, weight: torch.Tensor) -> None:
        q, scale = quantize(weight)  # a fresh scale: the update may widen the range
        module.weight.copy_(q)
        module.weight_scale.copy_(scale)


FP8_FORMAT = Fp8Format()


def fp8_modules(model: nn.Module) -> dict[str, nn.Module]:
    """The modules holding an fp8 `weight` with its `weight_scale`: FP8Linear, and its row-parallel shards."""
    return {name: m for name, m in model.named_modules() if FP8_FORMAT.owns(m)}
