"""comfy-kitchen (ComfyUI's kernel library, Apache-2.0, in every ComfyUI install) as the quantised formats call it:
the formats' one place that imports it (the transformer's fused kernels import it in the models room,
`model/transformer/kernels.py`). Its functions pick a CUDA or Triton kernel where the device has one and its eager
(CPU) one elsewhere, so the formats here compute through the same code as ComfyUI.

Without comfy-kitchen, fp8 and nvfp4 dequantise with this package's own code (`fp8.dequantize`,
`nvfp4.dequantize_nvfp4`); the formats only comfy-kitchen computes (int8, MXFP8) are refused at load naming the fix
(`require`). Every call here is device work only: no host read of a tensor (the sampler stays sync-free). Which
backends comfy-kitchen may use is left to it (inside ComfyUI, to ComfyUI's settings).
"""

from __future__ import annotations

import torch

from ltx2_core.errors import UnsupportedQuantizationError

try:
    import comfy_kitchen as ck
except ImportError:  # an install without it: fp8/nvfp4 fall back to our own dequantisation
    ck = None

OUT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # what comfy-kitchen's int8_linear returns


def available(function: str | None = None) -> bool:
    """Whether comfy-kitchen is installed (and has `function`, a public name or an op of torch.ops.comfy_kitchen)."""
    if ck is None:
        return False
    return function is None or hasattr(ck, function) or hasattr(torch.ops.comfy_kitchen, function)


def require(label: str, function: str | None = None) -> None:
    """Raises UnsupportedQuantizationError naming the fix when comfy-kitchen (or its `function`) is missing."""
    if not available(function):
        need = "comfy-kitchen>=0.2.40" if function else "comfy-kitchen>=0.2.12"
        raise UnsupportedQuantizationError(
            f"{label} weights compute through comfy-kitchen, ComfyUI's kernel library, and the installed one "
            f"{'is missing' if ck is None else f'has no {function}'}; pip install \"{need}\" (ComfyUI ships it), or "
            "load a bf16 or fp8 file")


def dequantize_fp8(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """fp8 (any shape) · per-tensor fp32 `scale` -> `dtype`, multiplied in fp32 then rounded once (comfy-kitchen
    multiplies in its output dtype, which in bf16 would round the scale itself first)."""
    return ck.dequantize_per_tensor_fp8(q, scale.float(), output_type=torch.float32).to(dtype)


def dequantize_nvfp4(packed: torch.Tensor, block_scales: torch.Tensor, tensor_scale: torch.Tensor,
                     dtype: torch.dtype) -> torch.Tensor:
    """uint8 (rows16, cols16/2) with swizzled fp8 block scales and an fp32 tensor scale -> (rows16, cols16) in
    `dtype`, computed in fp32 then rounded once."""
    return ck.dequantize_nvfp4(packed, tensor_scale.float(), block_scales, output_type=torch.float32).to(dtype)


def dequantize_mxfp8(q: torch.Tensor, block_scales: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """fp8 (rows32, cols32) with swizzled E8M0 block scales (one per 32 columns) -> (rows32, cols32) in `dtype`,
    computed in fp32 then rounded once."""
    return ck.dequantize_mxfp8(q, block_scales.view(torch.float8_e8m0fnu), output_type=torch.float32).to(dtype)


def dequantize_int8(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype, convrot: int = 0) -> torch.Tensor:
    """int8 (out, in) · scale (0-d or (out, 1) fp32) -> `dtype`; `convrot` > 0: the weight was rotated by a
    block-diagonal Hadamard of that group size over its inputs, rotated back here."""
    if convrot:
        w = torch.ops.comfy_kitchen.dequantize_int8_convrot_weight(q, scale.float(), convrot)
    else:
        w = ck.dequantize_int8_simple(q, scale.float())
    return w.to(dtype)


def int8_linear(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None,
                convrot: int = 0) -> torch.Tensor:
    """y = x Wᵀ + b on int8 tensor cores: x quantised per row on the device (ComfyUI's int8 forward)."""
    kwargs = {"convrot": True, "convrot_groupsize": convrot} if convrot else {}
    return ck.int8_linear(x.contiguous(), q, scale.float(), bias, x.dtype, **kwargs)


def quantize_int8(weight: torch.Tensor, rows: bool, convrot: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(q int8, scale fp32: 0-d, or (out, 1) when `rows` or `convrot`) as comfy-kitchen's quantiser writes them."""
    w = weight.float()
    if convrot:
        return torch.ops.comfy_kitchen.quantize_int8_convrot_weight(w, convrot)
    return ck.quantize_int8_rowwise(w) if rows else ck.quantize_int8_tensorwise(w)


def quantize_mxfp8(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(fp8 (rows32, cols32), E8M0 swizzled block scales), padded with zeros to multiples of 32."""
    rows, cols = weight.shape
    return ck.quantize_mxfp8(weight.float(), pad_32x=rows % 32 != 0 or cols % 32 != 0)
