"""Tiny transformers quantised as ComfyUI's quantiser writes them: comfy-kitchen's eager quantize functions, each
quantised block linear marked by a `comfy_quant` uint8 JSON tensor (comfy/ops.py) or by the header's
`_quantization_metadata` entry (comfy/utils.py), next to a dequantised twin of the same file."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ltx2_core.quant.policy import BLOCK_LINEARS

PREFIX = "model.diffusion_model."


def _eager():
    import comfy_kitchen as ck  # only here: callers skip without it

    return ck.backends.eager.quantization


def quantise(fmt: str, w: torch.Tensor) -> tuple[dict[str, torch.Tensor], dict, torch.Tensor]:
    """(the tensors beside nothing but `.weight` + scales, the comfy_quant entry, comfy-kitchen's eager dequantised
    (out, in) fp32 weight) of `w` (out, in) as ComfyUI's quantiser stores format `fmt`."""
    eager = _eager()
    out, cols = w.shape
    if fmt in ("int8_tensorwise", "int8_rowwise"):
        q, s = (eager.quantize_int8_tensorwise if fmt == "int8_tensorwise" else eager.quantize_int8_rowwise)(w)
        return {"weight": q, "weight_scale": s}, {"format": "int8_tensorwise"}, eager.dequantize_int8_simple(q, s)
    if fmt == "int8_convrot":
        q, s = eager.quantize_int8_convrot_weight(w, 16)
        ref = eager.dequantize_int8_convrot_weight(q, s, 16)
        return {"weight": q, "weight_scale": s}, {"format": "int8_tensorwise", "convrot": True,
                                                  "convrot_groupsize": 16}, ref
    if fmt == "mxfp8":
        q, s = eager.quantize_mxfp8(w, pad_32x=out % 32 != 0 or cols % 32 != 0)
        return {"weight": q, "weight_scale": s}, {"format": "mxfp8"}, \
            eager.dequantize_mxfp8(q, s, torch.float32)[:out, :cols]
    if fmt == "nvfp4":
        ts = (w.abs().amax() / (6 * 448)).float()
        q, s = eager.quantize_nvfp4(w, ts, pad_16x=True)
        return {"weight": q, "weight_scale": s, "weight_scale_2": ts}, {"format": "nvfp4"}, \
            eager.dequantize_nvfp4(q, ts, s, torch.float32)[:out, :cols]
    scale = (w.abs().amax() / 448).float()
    q = eager.quantize_per_tensor_fp8(w, scale)
    return {"weight": q, "weight_scale": scale}, {"format": "float8_e4m3fn"}, \
        eager.dequantize_per_tensor_fp8(q, scale, torch.float32)


def write_comfy_quantised(source: Path, path: Path, fmt: str, header: bool = False,
                          full_precision: frozenset[str] = frozenset()) -> tuple[Path, Path, set[str]]:
    """`source` with the policy's block linears in `fmt` as ComfyUI writes them (each marked by a `comfy_quant`
    uint8 JSON tensor, or with `header` by the `_quantization_metadata` header entry), and its dequantised twin; the
    layers named in `full_precision` (without the DiT's prefix) are marked `full_precision_matrix_mult`."""
    with safe_open(str(source), framework="pt") as f:
        tensors, metadata = {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata())  # noqa: SIM118
    twin, layers = dict(tensors), {}
    stems = sorted(k[: -len(".weight")] for k in tensors if k.startswith(PREFIX + "transformer_blocks.")
                   and k.endswith(".weight") and k[: -len(".weight")].endswith(BLOCK_LINEARS))
    for stem in stems:
        w = tensors[stem + ".weight"].float()
        if fmt == "int8_convrot" and w.shape[1] % 16:
            continue  # ComfyUI's quantiser leaves the layers a group does not divide in full precision
        quantised, conf, ref = quantise(fmt, w)
        if stem.removeprefix(PREFIX) in full_precision:
            conf = {**conf, "full_precision_matrix_mult": True}
        tensors |= {f"{stem}.{k}": v.contiguous() for k, v in quantised.items()}
        twin[stem + ".weight"] = ref.contiguous().to(tensors[stem + ".bias"].dtype if stem + ".bias" in tensors else w.dtype)
        layers[stem] = conf
        if not header:
            tensors[stem + ".comfy_quant"] = torch.tensor(list(json.dumps(conf).encode("utf-8")), dtype=torch.uint8)
    if header:
        metadata["_quantization_metadata"] = json.dumps({"format_version": "1.0", "layers": layers})
    save_file(tensors, str(path), metadata=metadata)
    save_file(twin, str(path.with_name("twin-" + path.name)),
              metadata={k: v for k, v in metadata.items() if k != "_quantization_metadata"})
    return path, path.with_name("twin-" + path.name), {s[len(PREFIX):] for s in layers}
