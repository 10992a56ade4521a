"""ComfyUI's quantised formats through comfy-kitchen: each format's layer keeps the quantised bytes and its output
equals comfy-kitchen's eager reference (dequantise, then F.linear); a tiny transformer quantised the way ComfyUI's
quantiser writes each format (comfy-kitchen's quantize functions, the `comfy_quant` / `_quantization_metadata`
layout of comfy/ops.py and comfy/utils.py) loads through our loader and runs as its dequantised twin."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from support.comfy_quant import quantise, write_comfy_quantised
from torch import nn

from ltx2_core import load_transformer
from ltx2_core.demo import demo_inputs
from ltx2_core.quant import registry
from ltx2_core.quant.fp8 import FP8_FORMAT
from ltx2_core.quant.int8 import INT8_CONVROT, INT8_ROWWISE, INT8_TENSORWISE
from ltx2_core.quant.mxfp8 import MXFP8_FORMAT
from ltx2_core.quant.nvfp4 import NVFP4_FORMAT
from ltx2_core.quant.policy import stores_quantised

ck = pytest.importorskip("comfy_kitchen")
eager = ck.backends.eager.quantization  # the reference: comfy-kitchen's portable kernels, called directly
CONVROT16 = next(f for f in INT8_CONVROT if f.convrot == 16)


FORMATS = {"int8_tensorwise": INT8_TENSORWISE, "int8_rowwise": INT8_ROWWISE, "int8_convrot": CONVROT16,
           "mxfp8": MXFP8_FORMAT, "nvfp4": NVFP4_FORMAT, "float8_e4m3fn": FP8_FORMAT}
STORED = {"int8_tensorwise": torch.int8, "int8_rowwise": torch.int8, "int8_convrot": torch.int8,
          "mxfp8": torch.float8_e4m3fn, "nvfp4": torch.uint8, "float8_e4m3fn": torch.float8_e4m3fn}


def _layer(fmt: str, w: torch.Tensor, bias: torch.Tensor, matmul: bool | None = False):
    tensors, conf, ref = quantise(fmt, w)
    shape = tuple(tensors["weight_scale"].shape)
    assert registry.declared(conf, shape) is FORMATS[fmt]  # detected from the marker and the scale's shape
    linear = nn.Linear(w.shape[1], w.shape[0])
    layer = FORMATS[fmt].layer(linear, set(tensors) - {"weight"}, matmul)
    layer.load_state_dict({**tensors, "bias": bias}, strict=True, assign=True)
    return layer, ref


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_each_formats_layer_equals_kitchens_eager_reference(fmt):
    gen = torch.Generator().manual_seed(0)
    w, bias = torch.randn(40, 64, generator=gen) * 0.05, torch.randn(40, generator=gen)
    layer, ref = _layer(fmt, w, bias)
    assert layer.weight.dtype == STORED[fmt] and registry.format_of(layer) is FORMATS[fmt]
    x = torch.randn(3, 5, 64, generator=gen)
    # the same dequantisation (comfy-kitchen's, dispatched to its eager kernel on the CPU), one fp32 matmul
    torch.testing.assert_close(layer(x), F.linear(x, ref, bias), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(FORMATS[fmt].dequantize(layer, torch.float32), ref, atol=0, rtol=0)
    error = (ref - w).abs().max() / w.abs().max()  # a real quantisation of w (4-bit nvfp4 the coarsest), not a copy
    assert 0 < error < 0.2


@pytest.mark.parametrize("fmt", ["int8_tensorwise", "int8_rowwise", "int8_convrot"])
def test_the_int8_matmul_path_is_kitchens_int8_linear(fmt):
    """matmul=True (what CUDA devices pick): the activations quantised per row, int8 products, as ComfyUI runs."""
    gen = torch.Generator().manual_seed(1)
    w, bias = torch.randn(40, 64, generator=gen) * 0.05, torch.randn(40, generator=gen)
    layer, ref = _layer(fmt, w, bias, matmul=True)
    x = torch.randn(2, 7, 64, generator=gen)
    convrot = {"convrot": True, "convrot_groupsize": 16} if fmt == "int8_convrot" else {}
    want = eager.int8_linear(x, layer.weight, layer.weight_scale.float(), bias, torch.float32, **convrot)
    torch.testing.assert_close(layer(x), want, atol=1e-6, rtol=1e-6)
    exact = F.linear(x, ref, bias)  # within the activations' int8 rounding of the dequantised product
    assert (layer(x) - exact).abs().max() < 0.02 * exact.abs().max()


@pytest.fixture
def tensor_core_mm(monkeypatch):
    """comfy-kitchen's `scaled_mm_mxfp8` / `scaled_mm_nvfp4` run on tensor cores only (the eager backend calls torch's
    scaled_mm, which has no swizzled scales on the CPU): here they are the same product of comfy-kitchen's own
    eager dequantisations, so the input quantisation, padding, slicing and bias around them run on the CPU."""
    def mxfp8(a, b, scale_a, scale_b, bias=None, out_dtype=None):
        return (eager.dequantize_mxfp8(a, scale_a, torch.float32)
                @ eager.dequantize_mxfp8(b, scale_b, torch.float32).T).to(out_dtype)

    def nvfp4(a, b, tensor_a, tensor_b, block_a, block_b, bias=None, out_dtype=None, alpha=None):
        return (eager.dequantize_nvfp4(a, tensor_a, block_a, torch.float32)
                @ eager.dequantize_nvfp4(b, tensor_b, block_b, torch.float32).T).to(out_dtype)

    monkeypatch.setattr(ck, "scaled_mm_mxfp8", mxfp8)
    monkeypatch.setattr(ck, "scaled_mm_nvfp4", nvfp4)


@pytest.mark.parametrize("fmt", ["mxfp8", "nvfp4"])
def test_the_mxfp8_and_nvfp4_matmul_paths_quantise_the_input_as_comfyui(fmt, tensor_core_mm):
    """matmul=True (what compute capability 10 picks): the input padded to the stored width and quantised to the
    format on the device (NVFP4: its amax scale), multiplied, the padding sliced off, the bias added."""
    gen = torch.Generator().manual_seed(4)
    w, bias = torch.randn(40, 72, generator=gen) * 0.05, torch.randn(40, generator=gen)  # pads rows and inputs
    layer, ref = _layer(fmt, w, bias, matmul=True)
    x = torch.randn(2, 7, 72, generator=gen)
    rows = x.reshape(14, 72)
    if fmt == "mxfp8":
        q, scales = eager.quantize_mxfp8(F.pad(rows, (0, 24)), pad_32x=True)
        xq = eager.dequantize_mxfp8(q, scales, torch.float32)[:14, :72]
    else:
        scale = rows.abs().amax() / (6 * 448)
        q, scales = eager.quantize_nvfp4(F.pad(rows, (0, 8)), scale, pad_16x=True)
        xq = eager.dequantize_nvfp4(q, scale, scales, torch.float32)[:14, :72]
    got = layer(x)
    assert got.shape == (2, 7, 40)
    torch.testing.assert_close(got, F.linear(xq, ref, bias).reshape(2, 7, 40), atol=1e-5, rtol=1e-5)
    exact = F.linear(x, ref, bias)
    assert 0 < (got - exact).abs().max() < 0.2 * exact.abs().max()  # the input really was quantised


@pytest.mark.parametrize("matmul", [False, True])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_no_forward_reads_a_tensor_on_the_host(fmt, matmul, monkeypatch, tensor_core_mm):
    """The sampler never waits on the device: no .item(), bool(), .tolist() or .numpy() of a tensor per call."""
    gen = torch.Generator().manual_seed(3)
    layer, _ = _layer(fmt, torch.randn(40, 64, generator=gen) * 0.05, torch.zeros(40), matmul=matmul)
    x = torch.randn(2, 64, generator=gen)

    def host_read(*args, **kwargs):
        raise AssertionError("a host read in the forward")

    for name in ("item", "__bool__", "tolist", "numpy", "__float__", "__int__"):
        monkeypatch.setattr(torch.Tensor, name, host_read)
    layer(x)


@pytest.mark.parametrize("fmt", ["int8_tensorwise", "int8_rowwise", "mxfp8", "nvfp4"])
def test_a_lora_update_is_requantised_in_the_format(fmt):
    gen = torch.Generator().manual_seed(2)
    w = torch.randn(40, 64, generator=gen) * 0.05
    layer, ref = _layer(fmt, w, torch.zeros(40))
    update = ref + 0.01 * torch.randn(40, 64, generator=gen)
    FORMATS[fmt].fuse_(layer, update)
    assert layer.weight.dtype == STORED[fmt]
    got = FORMATS[fmt].dequantize(layer, torch.float32)
    # within a rounding step: E2M1 steps are up to 1/6 of a block's largest value, fp8's and int8's far finer
    assert (got - update).abs().max() < (0.2 if fmt == "nvfp4" else 0.05) * update.abs().max()


def test_other_int8_variants_are_refused_naming_them():
    assert registry.declared({"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": 32}, (8, 1)) \
        is None  # not a regular Hadamard size
    assert registry.declared({"format": "int8_tensorwise", "params": {"convrot": True}}, (8, 1)).convrot == 256
    assert registry.declared({"format": "int8_tensorwise"}, (8, 1)) is INT8_ROWWISE
    assert registry.declared({"format": "int8_tensorwise"}, ()) is INT8_TENSORWISE


@pytest.mark.parametrize("fmt, header", [("int8_tensorwise", False), ("int8_rowwise", False),
                                         ("int8_convrot", False), ("mxfp8", False), ("int8_tensorwise", True),
                                         ("mxfp8", True), ("nvfp4", False), ("nvfp4", True)])
def test_a_comfyui_quantised_transformer_loads_and_runs_as_its_dequantised_twin(tiny_checkpoints, tmp_path, fmt,
                                                                                 header):
    path, twin, layers = write_comfy_quantised(tiny_checkpoints["2.0"], tmp_path / f"{fmt}.safetensors", fmt, header)
    assert stores_quantised("auto", path)  # the memory plan counts the file's linears at a byte a weight
    model = load_transformer(path, dtype=torch.float32)
    found = {name: q.format for name, q in registry.quantised_modules(model).items()}
    assert set(found) == layers and set(found.values()) == {FORMATS[fmt]}
    assert all(m.weight.dtype == STORED[fmt] for m, _ in registry.quantised_modules(model).values())
    reference = load_transformer(twin, dtype=torch.float32)
    assert not registry.quantised_modules(reference)
    inputs = demo_inputs(model, text_tokens=7)
    for got, want in zip(model(*inputs), reference(*inputs)):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("header", [False, True])
def test_a_layer_marked_full_precision_matrix_mult_is_dequantised_per_call(tiny_checkpoints, tmp_path, header):
    """ComfyUI's `full_precision_matrix_mult` marker: that layer runs dequantised (never the int8 matmul), the
    others pick by device; a forced choice still wins."""
    marked = "transformer_blocks.0.attn1.to_q"
    path, _, layers = write_comfy_quantised(tiny_checkpoints["2.0"], tmp_path / "int8.safetensors", "int8_tensorwise",
                                            header, full_precision=frozenset({marked}))
    modules = {name: m for name, (m, _) in registry.quantised_modules(load_transformer(path)).items()}
    assert set(modules) == layers and marked in modules
    assert modules[marked].matmul is False
    assert all(m.matmul is None for name, m in modules.items() if name != marked)


def test_bf16_dequantisation_rounds_once_as_before():
    """comfy-kitchen multiplies in its output dtype; asked for fp32 and rounded once, fp8 and nvfp4 keep this
    package's values (a bf16 scale would bias a whole matrix by up to 0.4 %)."""
    from ltx2_core.quant.fp8 import dequantize, quantize

    w = torch.randn(40, 64, generator=torch.Generator().manual_seed(4)) * 0.05
    q, scale = quantize(w)
    assert torch.equal(dequantize(q, scale, torch.bfloat16), (q.float() * scale).to(torch.bfloat16))


def test_without_comfy_kitchen_fp8_falls_back_and_int8_names_the_fix(monkeypatch):
    from ltx2_core.errors import UnsupportedQuantizationError
    from ltx2_core.quant import kitchen
    from ltx2_core.quant.fp8 import dequantize, quantize

    w = torch.randn(8, 16, generator=torch.Generator().manual_seed(5))
    q, scale = quantize(w)
    with_kitchen = dequantize(q, scale, torch.float32)
    monkeypatch.setattr(kitchen, "ck", None)
    torch.testing.assert_close(dequantize(q, scale, torch.float32), with_kitchen, atol=0, rtol=0)
    with pytest.raises(UnsupportedQuantizationError, match="pip install"):
        INT8_TENSORWISE.layer(nn.Linear(16, 8), {"weight_scale"})
