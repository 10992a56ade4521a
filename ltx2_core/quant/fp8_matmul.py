"""How an fp8 linear (`quant.fp8.FP8Linear`: an fp8 (out, in) weight with its file's per-tensor scale) multiplies:
the fp8 matmul recipes, one chosen per model (`set_fp8_matmul`; the command line's --fp8-matmul).

| recipe | activation scale | activation quantiser | GEMM |
|---|---|---|---|
| dequantize | – | – (the weight dequantised for the call) | bf16 `F.linear` |
| tensor | per tensor (or the file's `input_scale`) | eager, in the input dtype (abs, amax, divide, clamp, cast) | `torch._scaled_mm` |
| tensor-fused | per tensor (or the file's `input_scale`) | one compiled function (amax, scale, cast), fp32 | `torch._scaled_mm` |
| row | per row (token) | eager (amax per row, divide, clamp, cast), fp32 | `torch._scaled_mm`, rowwise |
| row-fused | per row (token) | one compiled function (one pass), fp32 | `torch._scaled_mm`, rowwise |
| kitchen | per tensor (or the file's `input_scale`) | comfy-kitchen's `quantize_per_tensor_fp8` | comfy-kitchen's `scaled_mm_v2` |

"tensor" is the path this package took before the recipes (the baseline of bench/suite_fp8.py). The weight keeps its
file's per-tensor scale: the rowwise recipes pass it per output channel, the tensor scale repeated (exact; a vector
of 4·out bytes made per call, nothing kept); re-quantising each channel with its own scale would round the stored
weight a second time, so no recipe does. Every recipe keeps the weight as loaded, (out, in) row-major, which is the
column-major (in, out) operand `_scaled_mm` wants: `weight.t()` is a view, no transposed copy exists, and the memory
plan's count (one byte a weight plus a 4-byte scale) is what is held. A layer whose sides are not multiples of 16
dequantises whatever the recipe. Every step is device work: no host read (the sampler stays sync-free).

"auto" picks by a device capability table (`DeviceCaps`, passable for tests): fp8 tensor cores (CUDA compute
capability ≥ 8.9) → "tensor-fused" (with Triton; else "kitchen" where comfy-kitchen quantises on the device, else
"tensor"); elsewhere (CPU, older GPUs) "dequantize", as before. A named recipe the device cannot run is refused early
(`check`) naming the fix. bench/suite_fp8.py measures every recipe; the pick follows its figures.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from typing import NamedTuple

import torch

from ltx2_core.quant import kitchen

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max  # 448
_TINY = torch.finfo(torch.float32).tiny
FUSED_BACKEND = "inductor"  # torch.compile's backend for the fused quantisers (tests trace them with "eager")


class Recipe(NamedTuple):
    """One way to multiply: `activation` scaling ("tensor", "row"; None: the weight dequantised instead) and its
    `quantiser` ("eager", "fused", "kitchen")."""

    name: str
    activation: str | None
    quantiser: str | None


RECIPES = {r.name: r for r in (
    Recipe("dequantize", None, None),
    Recipe("tensor", "tensor", "eager"),
    Recipe("tensor-fused", "tensor", "fused"),
    Recipe("row", "row", "eager"),
    Recipe("row-fused", "row", "fused"),
    Recipe("kitchen", "tensor", "kitchen"),
)}
CHOICES = ("auto", *RECIPES)


class DeviceCaps(NamedTuple):
    """What a device offers the recipes: its type, CUDA compute capability (None off CUDA), whether Triton can
    compile for it, and whether comfy-kitchen quantises fp8 on it."""

    type: str
    capability: tuple[int, int] | None = None
    triton: bool = False
    kitchen: bool = False

    @property
    def fp8_gemm(self) -> bool:
        """fp8 tensor cores (CUDA ≥ 8.9), or the CPU, where PyTorch has a reference `_scaled_mm` kernel."""
        return self.type == "cpu" or (self.type == "cuda" and self.capability is not None and self.capability >= (8, 9))


@functools.cache
def device_caps(device: torch.device) -> DeviceCaps:
    """The capability table of a real device."""
    device = torch.device(device)
    if device.type != "cuda":
        return DeviceCaps(device.type, None, False, kitchen.available("quantize_per_tensor_fp8"))
    triton = importlib.util.find_spec("triton") is not None
    return DeviceCaps("cuda", torch.cuda.get_device_capability(device), triton, _kitchen_on_cuda())


def _kitchen_on_cuda() -> bool:
    if not kitchen.available("quantize_per_tensor_fp8"):
        return False
    backends = kitchen.ck.list_backends()
    return any(backends.get(name, {}).get("available") for name in ("cuda", "triton"))


def auto_recipe(caps: DeviceCaps) -> str:
    """The recipe "auto" takes on a device with `caps` (see the module docstring)."""
    if caps.type != "cuda" or not caps.fp8_gemm:
        return "dequantize"
    return "tensor-fused" if caps.triton else "kitchen" if caps.kitchen else "tensor"


def check(recipe: str, caps: DeviceCaps) -> None:
    """Raises ValueError naming the fix when `recipe` is unknown or the device (`caps`) cannot run it."""
    if recipe not in CHOICES:
        raise ValueError(f"fp8 matmul must be one of {', '.join(CHOICES)}, got {recipe!r}")
    if recipe == "auto" or RECIPES[recipe].activation is None:
        return
    where = f"this {caps.type} device" + (f" (compute capability {caps.capability[0]}.{caps.capability[1]})"
                                          if caps.capability else "")
    if not caps.fp8_gemm:
        raise ValueError(f"fp8 matmul {recipe!r} multiplies on fp8 tensor cores, which {where} lacks (CUDA compute "
                         "capability 8.9 or newer: RTX 40xx/50xx, L40, H100, B200); use auto or dequantize")
    quantiser = RECIPES[recipe].quantiser
    if quantiser == "fused" and caps.type == "cuda" and not caps.triton:
        raise ValueError(f"fp8 matmul {recipe!r} compiles its quantiser with Triton, which is not installed; "
                         f"pip install triton, or use {recipe.removesuffix('-fused')!r}")
    if quantiser == "kitchen" and not caps.kitchen:
        raise ValueError(f"fp8 matmul 'kitchen' needs comfy-kitchen's fp8 quantiser on {where}; pip install "
                         "\"comfy-kitchen>=0.2.12\" (ComfyUI ships it), or use tensor-fused or tensor")


def resolve(setting: str, device: torch.device | str, caps: DeviceCaps | None = None) -> str:
    """The recipe `setting` ("auto" or a name) means on `device` (its table `caps`, default the real one), checked."""
    caps = caps or device_caps(torch.device(device))
    check(setting, caps)
    return auto_recipe(caps) if setting == "auto" else setting


# the quantisers: (rows (m, k) in the compute dtype) -> (q fp8 (m, k), fp32 scale: 0-d or (m, 1)), x ≈ q · scale

def amax_scale(rows: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """max |x| / 448 in fp32 (over everything, or per row with dim=-1 as (m, 1)), at least the smallest normal."""
    amax = torch.linalg.vector_norm(rows, float("inf")) if dim is None else \
        torch.linalg.vector_norm(rows, float("inf"), dim=dim, keepdim=True)  # one read, no |x| copy
    return (amax.float() / FP8_MAX).clamp(min=_TINY)


def quantise_tensor(rows: torch.Tensor, scale: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per tensor, rounded to nearest in fp32: with the file's static `scale`, else amax / 448."""
    scale = amax_scale(rows) if scale is None else scale.float()
    return (rows.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


def quantise_rows(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row (one scale a token, (m, 1)), rounded to nearest in fp32."""
    scale = amax_scale(rows, dim=-1)
    return (rows.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


def quantise_tensor_eager(rows: torch.Tensor, scale: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The baseline's quantiser, as it was: amax of |x|, then divided in the input's dtype."""
    if scale is None:
        scale = (rows.abs().amax().float() / FP8_MAX).clamp(min=_TINY)
    else:
        scale = scale.float()
    return (rows / scale.to(rows.dtype)).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


@functools.cache
def fused(function: Callable, backend: str) -> Callable:
    """`function` compiled whole (one graph, any size): Inductor fuses its reduction and cast."""
    return torch.compile(function, backend=backend, dynamic=True, fullgraph=True)


def quantise_kitchen(rows: torch.Tensor, scale: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per tensor through comfy-kitchen's quantiser (one pass on CUDA), the amax in one read."""
    scale = amax_scale(rows) if scale is None else scale.float()
    return kitchen.ck.quantize_per_tensor_fp8(rows.contiguous(), scale), scale


def quantiser(recipe: Recipe) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """The activation quantiser of an fp8 recipe."""
    if recipe.quantiser == "kitchen":
        return quantise_kitchen
    if recipe.activation == "row":
        return fused(quantise_rows, FUSED_BACKEND) if recipe.quantiser == "fused" else quantise_rows
    if recipe.quantiser == "fused":
        return fused(quantise_tensor, FUSED_BACKEND)
    return quantise_tensor_eager


def multiplies(recipe: str, in_features: int, out_features: int) -> bool:
    """Whether `recipe` multiplies a layer of these sides in fp8 (else the layer dequantises its weight)."""
    return RECIPES[recipe].activation is not None and in_features % 16 == 0 and out_features % 16 == 0


def linear(x: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor | None,
           recipe: str, input_scale: torch.Tensor | None = None) -> torch.Tensor:
    """y = x · (weight · weight_scale)ᵀ + bias on fp8 tensor cores by the fp8 `recipe` (`multiplies` holds);
    `weight` fp8 (out, in) as stored, `weight_scale` 0-d fp32, `input_scale` the file's static activation scale
    (the per-tensor recipes use it; the rowwise ones measure every row)."""
    out_features, in_features = weight.shape
    spec = RECIPES[recipe]
    bias = None if bias is None else bias.to(x.dtype)
    rows = x.reshape(-1, in_features)
    quantise = quantiser(spec)
    if spec.activation == "row":
        q, scale_a = quantise(rows)
        # rowwise on CUDA: per-channel weight scales (the tensor scale repeated, contiguous) and a bf16 output
        scale_b = weight_scale.float().expand(1, out_features).contiguous()
        out_dtype = torch.bfloat16 if rows.is_cuda else x.dtype
        out = torch._scaled_mm(q, weight.t(), scale_a=scale_a, scale_b=scale_b,
                               bias=None if bias is None else bias.to(out_dtype), out_dtype=out_dtype).to(x.dtype)
    else:
        q, scale_a = quantise(rows, input_scale)
        mm = _kitchen_mm() if spec.quantiser == "kitchen" else _scaled_mm
        out = mm(q, weight.t(), scale_a, weight_scale.float(), bias, x.dtype)
    return out.reshape(*x.shape[:-1], out_features)


def _kitchen_mm() -> Callable:
    """comfy-kitchen's scaled mm (F.scaled_mm where PyTorch has it); an older comfy-kitchen without it: ours."""
    module = getattr(kitchen.ck, "scaled_mm_v2", None)
    return getattr(module, "scaled_mm_v2", _scaled_mm)


def _scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
               bias: torch.Tensor | None, out_dtype: torch.dtype) -> torch.Tensor:
    return torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, bias=bias, out_dtype=out_dtype)


def set_fp8_matmul(model: torch.nn.Module, setting: str = "auto", device: torch.device | str | None = None,
                   caps: DeviceCaps | None = None) -> str:
    """Every fp8 linear of `model` multiplies by `setting` ("auto" or a recipe of `RECIPES`) on `device` (default:
    where the model's first parameter is); a layer its file marks `full_precision_matrix_mult` keeps dequantising.
    Refuses a recipe the device cannot run (ValueError naming the fix) before any layer changes; returns the
    recipe taken."""
    if device is None:
        device = next(model.parameters()).device
    recipe = resolve(setting, device, caps)
    for module in model.modules():
        if hasattr(module, "recipe") and module.weight.dtype == FP8 and module.scaled_mm is not False:  # FP8Linear
            module.recipe = recipe
    return recipe
