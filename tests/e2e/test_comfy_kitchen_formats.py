"""Our readers against ComfyUI's own quantiser: comfy_kitchen (ComfyUI's quantisation library, in the shared
ComfyUI's Python) quantises a matrix the way ComfyUI writes fp4_mixed files, and our NVFP4 dequantisation must equal
its; ComfyUI's `comfy.quant_ops` layouts quantise a tiny transformer's block linears to int8 (tensorwise, rowwise,
ConvRot), MXFP8 and NVFP4 as ComfyUI saves them (`QuantizedTensor.state_dict` + the `comfy_quant` JSON of comfy/ops.py),
and the file loads through our loader and runs as ComfyUI's own dequantisation of it."""

from __future__ import annotations

import subprocess

import pytest
import torch
from safetensors.torch import load_file

from ltx2_core import load_transformer
from ltx2_core.demo import demo_inputs
from ltx2_core.quant import registry
from ltx2_core.quant.nvfp4 import dequantize_nvfp4

from .conftest import _comfyui

PACK = """
import sys, torch
from safetensors.torch import save_file
from comfy_kitchen.backends.eager.quantization import dequantize_nvfp4, quantize_nvfp4
torch.manual_seed(0)
weight = torch.randn(200, 72) * 0.05  # rows and columns not multiples of 16: padded, as real layers never are
tensor_scale = (weight.abs().amax() / (6 * 448)).float()
packed, blocked = quantize_nvfp4(weight, tensor_scale, pad_16x=True)
theirs = dequantize_nvfp4(packed, tensor_scale, blocked, output_type=torch.float32)
save_file({"weight": packed.contiguous(), "weight_scale": blocked.contiguous(), "weight_scale_2": tensor_scale,
           "theirs": theirs.contiguous()}, sys.argv[1])
"""


def test_our_nvfp4_dequantisation_equals_comfyuis(tmp_path):
    _, python = _comfyui()
    out = tmp_path / "nvfp4.safetensors"
    run = subprocess.run([str(python), "-c", PACK, str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    tensors = load_file(str(out))
    ours = dequantize_nvfp4(tensors["weight"], tensors["weight_scale"], tensors["weight_scale_2"], 200, 72,
                            torch.float32)
    torch.testing.assert_close(ours, tensors["theirs"][:200, :72], atol=1e-7, rtol=0)


QUANTISE = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from safetensors import safe_open
from safetensors.torch import save_file
from comfy.quant_ops import QuantizedTensor
fmt, source, out, twin_out = sys.argv[2:6]
LAYOUT = {"int8_tensorwise": ("TensorWiseINT8Layout", {}),
          "int8_rowwise": ("TensorWiseINT8Layout", {"per_channel": True}),
          "int8_convrot": ("TensorWiseINT8Layout", {"per_channel": True, "convrot": True, "convrot_groupsize": 16}),
          "mxfp8": ("TensorCoreMXFP8Layout", {}), "nvfp4": ("TensorCoreNVFP4Layout", {})}
LINEARS = (".to_q", ".to_k", ".to_v", ".to_out.0", "ff.net.0.proj", "ff.net.2")
with safe_open(source, framework="pt") as f:
    tensors, metadata = {k: f.get_tensor(k) for k in f.keys()}, f.metadata()
twin = dict(tensors)
layout, kwargs = LAYOUT[fmt]
for key in [k for k in tensors if ".transformer_blocks." in k and k.endswith(".weight")]:
    stem = key[: -len(".weight")]
    if not stem.endswith(LINEARS) or (fmt == "int8_convrot" and tensors[key].shape[1] % 16):
        continue
    qt = QuantizedTensor.from_float(tensors[key].float(), layout, **kwargs)
    tensors.update({k: v.contiguous() for k, v in qt.state_dict(key).items()})
    conf = {"format": fmt if fmt in ("mxfp8", "nvfp4") else "int8_tensorwise"}
    if fmt == "int8_convrot":  # as comfy/ops.py's _quantized_weight_state_dict writes it
        conf |= {"convrot": True, "convrot_groupsize": 16}
    tensors[stem + ".comfy_quant"] = torch.tensor(list(json.dumps(conf).encode("utf-8")), dtype=torch.uint8)
    twin[key] = qt.dequantize().float().contiguous()
save_file(tensors, out, metadata=metadata)
save_file(twin, twin_out, metadata=metadata)
"""


@pytest.mark.parametrize("fmt", ["int8_tensorwise", "int8_rowwise", "int8_convrot", "mxfp8", "nvfp4"])
def test_a_transformer_quantised_by_comfyuis_own_quantiser_loads_and_runs_as_comfyuis_dequantisation(
        tiny_checkpoints, tmp_path, fmt):
    comfyui, python = _comfyui()
    out, twin = tmp_path / f"{fmt}.safetensors", tmp_path / f"{fmt}-dequantised.safetensors"
    run = subprocess.run([str(python), "-c", QUANTISE, str(comfyui), fmt, str(tiny_checkpoints["2.0"]), str(out),
                          str(twin)], capture_output=True, text=True, timeout=300, cwd=str(comfyui), check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    model = load_transformer(out, dtype=torch.float32)
    formats = {q.format.label for q in registry.quantised_modules(model).values()}
    assert formats == {{"int8_tensorwise": "int8 tensorwise", "int8_rowwise": "int8 rowwise",
                        "int8_convrot": "int8 ConvRot/16", "mxfp8": "MXFP8", "nvfp4": "NVFP4"}[fmt]}
    reference = load_transformer(twin, dtype=torch.float32)
    inputs = demo_inputs(model, text_tokens=7)
    for got, want in zip(model(*inputs), reference(*inputs)):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
