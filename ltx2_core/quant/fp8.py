"""fp8 weights: `float8_e4m3fn` storage with a per-tensor fp32 dequantisation scale, w ≈ q · weight_scale, the
layout of the official LTX-2 fp8 checkpoints and of ComfyUI's fp8_scaled files (which `loader.fp8_files` reads).

`FP8Linear` keeps its weight in fp8 (half the bytes of bf16). Its forward multiplies on fp8 tensor cores
(`torch._scaled_mm`: the input quantised per tensor with the file's `input_scale`, or with amax/448 computed on the
device, never read on the host) where the device has them (CUDA compute capability ≥ 8.9) and both matrix sides are
multiples of 16; elsewhere (CPU, Ampere, odd shapes) it dequantises the weight for that one call. A LoRA is fused by
dequantising, adding the update and quantising again with a fresh scale (`fuse_delta_`).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max  # 448
_TINY = torch.finfo(torch.float32).tiny
# the block linears the releases quantise (ltx-core's fp8 policy): attention projections and feed-forwards
BLOCK_LINEARS = (".to_q", ".to_k", ".to_v", ".to_out.0", "ff.net.0.proj", "ff.net.2")  # video and audio FF


def quantize(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per tensor, round to nearest: (q in fp8, scale = amax / 448 in fp32, 0-d) with weight ≈ q · scale."""
    w = weight.float()
    scale = (w.abs().amax() / FP8_MAX).clamp(min=_TINY)
    return (w / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


def dequantize(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return (q.float() * scale.float()).to(dtype)


@functools.lru_cache(maxsize=None)
def _has_fp8_tensor_cores(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 9)


class FP8Linear(nn.Linear):
    """An `nn.Linear` whose weight is fp8 with a 0-d fp32 `weight_scale` (and, from the official files, a 0-d
    `input_scale`); the bias keeps the compute dtype. `scaled_mm`: None picks fp8 tensor cores by device, True/False
    forces the choice (True also runs on the CPU, where PyTorch has a reference kernel)."""

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

    @torch.no_grad()
    def fuse_delta_(self, delta: torch.Tensor) -> None:
        """weight ← quantize(dequantized weight + delta), with a fresh scale."""
        q, scale = quantize(self.dequantized(torch.float32) + delta.float())
        self.weight.copy_(q)
        self.weight_scale.copy_(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        use = self.scaled_mm if self.scaled_mm is not None else _has_fp8_tensor_cores(x.device)
        if use and self.in_features % 16 == 0 and self.out_features % 16 == 0:
            return self._fp8_matmul(x)
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, self.dequantized(x.dtype), bias)

    def _fp8_matmul(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        if self.input_scale is not None:
            scale = self.input_scale.float()
        else:  # per tensor, on the device: no host read
            scale = (rows.abs().amax().float() / FP8_MAX).clamp(min=_TINY)
        # quantised in the input's dtype (bf16 has more precision than fp8): no fp32 copy of the activations
        q = (rows / scale.to(rows.dtype)).clamp(-FP8_MAX, FP8_MAX).to(FP8)
        bias = None if self.bias is None else self.bias.to(x.dtype)
        out = torch._scaled_mm(q, self.weight.t(), scale_a=scale, scale_b=self.weight_scale.float(), bias=bias,
                               out_dtype=x.dtype)
        return out.reshape(*x.shape[:-1], self.out_features)


def fp8_modules(model: nn.Module) -> dict[str, nn.Module]:
    """The modules holding an fp8 `weight` with its `weight_scale`: FP8Linear, and its row-parallel shards."""
    return {name: m for name, m in model.named_modules() if isinstance(getattr(m, "weight", None), torch.Tensor)
            and m.weight.dtype == FP8 and getattr(m, "weight_scale", None) is not None}


def replace_module(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, module)


@torch.no_grad()
def quantize_blocks(model: nn.Module) -> int:
    """Quantises the block linears the releases quantise (BLOCK_LINEARS under `transformer_blocks.`) in place:
    fp8 at load from a bf16 file. Returns how many were quantised."""
    names = [name for name, m in model.named_modules() if type(m) is nn.Linear and
             name.startswith("transformer_blocks.") and name.endswith(BLOCK_LINEARS)]
    for name in names:
        replace_module(model, name, FP8Linear.from_linear(model.get_submodule(name)))
    return len(names)


@torch.no_grad()
def dequantize_model(model: nn.Module, dtype: torch.dtype) -> int:
    """Every FP8Linear back to an `nn.Linear` in `dtype` (e.g. for a device without memory pressure)."""
    modules = fp8_modules(model)
    for name, fp8 in modules.items():
        weight = nn.Parameter(dequantize(fp8.weight, fp8.weight_scale, dtype), requires_grad=False)
        if not isinstance(fp8, FP8Linear):  # a row-parallel shard: dequantised in place
            fp8.weight = weight
            fp8.weight_scale = fp8.input_scale = None
            continue
        linear = nn.Linear(fp8.in_features, fp8.out_features, fp8.bias is not None, device="meta")
        linear.weight = weight
        if fp8.bias is not None:
            linear.bias = nn.Parameter(fp8.bias.detach().to(dtype), requires_grad=False)
        replace_module(model, name, linear)
    return len(modules)
