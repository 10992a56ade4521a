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

import functools

import torch
import torch.nn.functional as F

from ltx2_core.errors import UnsupportedQuantizationError

try:
    import comfy_kitchen as ck
except ImportError:  # an install without it: fp8/nvfp4 fall back to our own dequantisation
    ck = None

OUT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)  # what comfy-kitchen's int8_linear returns
FP4_MAX, FP8_MAX = 6.0, 448.0  # the largest E2M1 and E4M3 values: an NVFP4 tensor scale is amax / (6 · 448)


@functools.cache
def blackwell(device: torch.device) -> bool:
    """Whether `device` multiplies MXFP8 / NVFP4 on tensor cores (NVIDIA compute capability ≥ 10.0, as ComfyUI's
    `supports_mxfp8_compute` / `supports_nvfp4_compute`)."""
    return device.type == "cuda" and torch.version.hip is None and torch.cuda.get_device_capability(device) >= (10, 0)


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


def _rows(x: torch.Tensor, cols: int) -> torch.Tensor:
    """`x` (..., in) as (m, cols): its rows, the inputs zero-padded to the stored weight's padded width."""
    a = x.reshape(-1, x.shape[-1])
    return F.pad(a, (0, cols - a.shape[1])) if a.shape[1] != cols else a.contiguous()


def _linear_out(y: torch.Tensor, x: torch.Tensor, out_features: int, bias: torch.Tensor | None) -> torch.Tensor:
    y = y[: x.numel() // x.shape[-1], :out_features]  # the padded rows and outputs dropped
    if bias is not None:
        y = y + bias
    return y.reshape(*x.shape[:-1], out_features)


def mxfp8_linear(x: torch.Tensor, q: torch.Tensor, block_scales: torch.Tensor, bias: torch.Tensor | None,
                 out_features: int) -> torch.Tensor:
    """y = x Wᵀ + b on MXFP8 tensor cores: x quantised to MXFP8 on the device per call, then comfy-kitchen's
    `scaled_mm_mxfp8` (ComfyUI's mxfp8 forward); `q` (rows32, cols32) and its swizzled E8M0 scales as stored."""
    a = _rows(x, q.shape[1])
    aq, a_scales = ck.quantize_mxfp8(a, pad_32x=a.shape[0] % 32 != 0)
    y = ck.scaled_mm_mxfp8(aq, q, a_scales, block_scales.view(torch.float8_e8m0fnu), None, x.dtype)
    return _linear_out(y, x, out_features, bias)


def nvfp4_linear(x: torch.Tensor, packed: torch.Tensor, block_scales: torch.Tensor, tensor_scale: torch.Tensor,
                 input_scale: torch.Tensor | None, bias: torch.Tensor | None, out_features: int) -> torch.Tensor:
    """y = x Wᵀ + b on NVFP4 tensor cores: x quantised to NVFP4 per call with the layer's static `input_scale`, or
    (None) amax / (6 · 448) computed on the device, as ComfyUI does; then comfy-kitchen's `scaled_mm_nvfp4`."""
    a = _rows(x, packed.shape[1] * 2)
    scale = input_scale.float() if input_scale is not None else \
        (a.abs().amax().float() / (FP4_MAX * FP8_MAX)).clamp_min(torch.finfo(torch.float32).tiny)
    aq, a_blocks = ck.quantize_nvfp4(a, scale, pad_16x=a.shape[0] % 16 != 0)
    y = ck.scaled_mm_nvfp4(aq, packed, scale, tensor_scale.float(), a_blocks, block_scales, None, x.dtype)
    return _linear_out(y, x, out_features, bias)


def quantize_nvfp4(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(packed uint8 (rows16, cols16/2), swizzled fp8 block scales, fp32 tensor scale amax / (6 · 448)), padded
    with zeros to multiples of 16, as ComfyUI's quantiser writes NVFP4."""
    w = weight.float()
    scale = (w.abs().amax() / (FP4_MAX * FP8_MAX)).clamp_min(torch.finfo(torch.float32).tiny)
    rows, cols = w.shape
    packed, blocks = ck.quantize_nvfp4(w, scale, pad_16x=rows % 16 != 0 or cols % 16 != 0)
    return packed, blocks, scale
