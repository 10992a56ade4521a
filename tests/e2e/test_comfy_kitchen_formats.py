"""Our NVFP4 reader against ComfyUI's own packer: comfy_kitchen (ComfyUI's quantisation library, in the shared
ComfyUI's Python) quantises a matrix the way ComfyUI writes fp4_mixed files; our dequantisation must equal its."""

from __future__ import annotations

import subprocess

import torch
from safetensors.torch import load_file

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
