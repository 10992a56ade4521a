"""The fp8 matmul recipes (ltx2_core/quant/fp8_matmul.py) on the CPU, where PyTorch 2.13 runs `torch._scaled_mm` on
float8_e4m3fn (per tensor and per row) with a reference kernel: each recipe multiplies its quantised operands exactly
as the dequantised fp32 product does, its error against the fp32 product of the unquantised input is stated (per
tensor vs per row), the weight is used in place (no transposed copy, nothing added to what the memory plan counts),
"auto" picks by a capability table, and a recipe a device cannot run is refused naming the fix."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_inputs, demo_transformer
from ltx2_core.memory.plan import transformer_weight_bytes
from ltx2_core.quant import fp8_matmul, kitchen
from ltx2_core.quant.fp8 import FP8, FP8_FORMAT, FP8Linear, fp8_modules
from ltx2_core.quant.fp8_matmul import DeviceCaps, auto_recipe, check, resolve, set_fp8_matmul
from ltx2_core.quant.policy import quantize_blocks

FP8_RECIPES = [name for name, recipe in fp8_matmul.RECIPES.items() if recipe.activation is not None
               and (recipe.quantiser != "kitchen" or kitchen.available("quantize_per_tensor_fp8"))]


@pytest.fixture(autouse=True)
def traced_quantisers(monkeypatch):
    """The fused quantisers traced whole by torch.compile's "eager" backend (fullgraph: a graph break fails), which
    runs the traced ops; Inductor's own kernel is checked once below (a C++ compile takes ~30 s on the CPU)."""
    monkeypatch.setattr(fp8_matmul, "FUSED_BACKEND", "eager")


def _layer(in_features=256, out_features=128, bias=True, seed=0):
    gen = torch.Generator().manual_seed(seed)
    linear = torch.nn.Linear(in_features, out_features, bias=bias)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(out_features, in_features, generator=gen) * 0.05)
        if bias:
            linear.bias.copy_(torch.randn(out_features, generator=gen))
    return FP8Linear.from_linear(linear)


def _tokens(decades: float, seed=1, rows=64, width=256):
    """Two clips of `rows` tokens whose magnitudes spread over `decades` (as a DiT's quiet and loud tokens do)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(2, rows, width, generator=gen) * torch.logspace(-decades, 0, rows).reshape(1, rows, 1)


def _reference_quantised(x: torch.Tensor, rows: bool, input_scale: float | None = None) -> torch.Tensor:
    """x quantised and dequantised in fp32, written out here independently of the module."""
    if input_scale is not None:
        scale = torch.tensor(input_scale)
    else:
        scale = x.abs().amax(dim=-1, keepdim=True) / 448 if rows else x.abs().amax() / 448
    return (x / scale).clamp(-448, 448).to(FP8).float() * scale


@pytest.mark.parametrize("recipe", FP8_RECIPES)
def test_each_recipe_is_the_fp32_product_of_its_quantised_operands(recipe):
    layer = _layer()
    layer.recipe = recipe
    x = _tokens(3)
    rows = fp8_matmul.RECIPES[recipe].activation == "row"
    want = _reference_quantised(x, rows) @ layer.dequantized(torch.float32).T + layer.bias
    torch.testing.assert_close(layer(x), want, atol=1e-5, rtol=1e-5)  # fp32 out: the kernel's sums only
    if not rows:  # the official files' static input scale replaces the measured one
        layer.input_scale = torch.tensor(0.01)
        want = _reference_quantised(x, rows, 0.01) @ layer.dequantized(torch.float32).T + layer.bias
        torch.testing.assert_close(layer(x), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("recipe", FP8_RECIPES)
def test_each_recipe_is_close_to_the_dequantised_fp32_matmul_in_bf16(recipe):
    """Against the fp32 product of the unquantised input and the dequantised weight, bf16 activations: ≤ 3.5 %
    of the output's norm for every recipe (e4m3's three mantissa bits; measured 2.6-2.7 %)."""
    layer = _layer()
    layer.bias = torch.nn.Parameter(layer.bias.bfloat16(), requires_grad=False)
    layer.recipe = recipe
    x = _tokens(2).bfloat16()
    want = x.float() @ layer.dequantized(torch.float32).T + layer.bias.float()
    got = layer(x)
    assert got.dtype == torch.bfloat16
    assert (got.float() - want).norm() / (want - layer.bias.float()).norm() < 0.035


def test_rowwise_scaling_keeps_quiet_tokens_that_a_tensor_scale_flushes():
    """Tokens over six decades: one scale for the tensor leaves the quietest tokens in fp8's subnormals (error far
    above 10 %), a scale per row keeps every token within 4 % (the stated difference between the two)."""
    layer = _layer(bias=False)
    x = _tokens(6)
    want = x @ layer.dequantized(torch.float32).T
    errors = {}
    for recipe in ("tensor", "row"):
        layer.recipe = recipe
        errors[recipe] = ((layer(x) - want).norm(dim=-1) / want.norm(dim=-1)).amax()
    assert errors["row"] < 0.04 and errors["tensor"] > 0.1


def test_the_fused_quantisers_equal_the_eager_ones_bit_for_bit():
    """Traced whole (one graph for any size) they compute the same ops: equal bytes (pure copies of one rounding)."""
    for width, rows in ((64, 37), (128, 50)):
        x = torch.randn(rows, width, dtype=torch.bfloat16)
        for function in (fp8_matmul.quantise_rows, fp8_matmul.quantise_tensor):
            q, scale = fp8_matmul.fused(function, "eager")(x)
            q0, scale0 = function(x)
            assert torch.equal(q.view(torch.uint8), q0.view(torch.uint8)) and torch.equal(scale, scale0)


def test_inductors_fused_row_quantiser_rounds_as_the_eager_one():
    x = torch.randn(37, 64, dtype=torch.bfloat16) * torch.logspace(-3, 1, 37).reshape(37, 1).bfloat16()
    q, scale = fp8_matmul.fused(fp8_matmul.quantise_rows, "inductor")(x)
    q0, scale0 = fp8_matmul.quantise_rows(x)
    torch.testing.assert_close(scale, scale0, atol=0, rtol=1e-6)
    # one rounding step at most where Inductor divides differently (a reciprocal), never more
    steps = (q.view(torch.uint8).int() - q0.view(torch.uint8).int()).abs()
    assert steps.max() <= 1 and steps.float().mean() < 0.01


@pytest.mark.parametrize("recipe", FP8_RECIPES)
def test_the_weight_is_multiplied_in_place_and_nothing_is_kept_beside_it(recipe, monkeypatch):
    layer = _layer()
    layer.recipe = recipe
    held = {name: (t.data_ptr(), t.shape) for name, t in [*layer.named_parameters(), *layer.named_buffers()]}
    operands = []
    scaled_mm = torch._scaled_mm
    monkeypatch.setattr(torch, "_scaled_mm", lambda a, b, **kw: operands.append(b) or scaled_mm(a, b, **kw))
    if recipe == "kitchen":  # comfy-kitchen calls F.scaled_mm where PyTorch has it
        scaled = torch.nn.functional.scaled_mm
        monkeypatch.setattr(torch.nn.functional, "scaled_mm",
                            lambda a, b, *args, **kw: operands.append(b) or scaled(a, b, *args, **kw))
    layer(_tokens(1))
    (b,) = operands
    assert b.data_ptr() == layer.weight.data_ptr() and b.stride() == (1, 256)  # the column-major view of the weight
    assert {name: (t.data_ptr(), t.shape) for name, t in [*layer.named_parameters(), *layer.named_buffers()]} == held
    kept = sum(t.numel() * t.element_size() for t in [layer.weight, layer.weight_scale])
    assert kept == FP8_FORMAT.weight_bytes(layer.weight.numel())  # what the memory plan counts a layer as


def test_the_memory_plan_counts_what_a_model_holds_under_every_recipe():
    config = TransformerConfig.tiny("2.0")
    model = demo_transformer(config, seed=0)
    quantize_blocks(model)
    plan = transformer_weight_bytes(config, torch.float32, fp8=True)
    for recipe in FP8_RECIPES:
        set_fp8_matmul(model, recipe)
        model(*demo_inputs(model, text_tokens=7))
        held = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
        assert held == plan.total, recipe


@pytest.mark.parametrize("caps, want", [
    (DeviceCaps("cuda", (9, 0), triton=True, kitchen=True), "tensor-fused"),  # H100, H200
    (DeviceCaps("cuda", (8, 9), triton=True), "tensor-fused"),  # RTX 40xx, L40
    (DeviceCaps("cuda", (10, 0), triton=True), "tensor-fused"),  # B200
    (DeviceCaps("cuda", (12, 0), triton=True), "tensor-fused"),  # RTX 50xx
    (DeviceCaps("cuda", (9, 0), triton=False, kitchen=True), "kitchen"),  # no Triton: comfy-kitchen's CUDA kernel
    (DeviceCaps("cuda", (9, 0)), "tensor"),  # neither: the eager baseline
    (DeviceCaps("cuda", (8, 6), triton=True, kitchen=True), "dequantize"),  # Ampere: no fp8 tensor cores
    (DeviceCaps("cpu", kitchen=True), "dequantize"),
    (DeviceCaps("mps"), "dequantize"),
])
def test_auto_picks_by_the_capability_table(caps, want):
    assert auto_recipe(caps) == want == resolve("auto", "meta", caps)


@pytest.mark.parametrize("recipe, caps, message", [
    ("row", DeviceCaps("cuda", (8, 0), triton=True), "compute capability 8.0.*lacks.*use auto or dequantize"),
    ("tensor", DeviceCaps("mps"), "fp8 tensor cores"),
    ("row-fused", DeviceCaps("cuda", (9, 0)), "pip install triton, or use 'row'"),
    ("tensor-fused", DeviceCaps("cuda", (9, 0)), "pip install triton, or use 'tensor'"),
    ("kitchen", DeviceCaps("cuda", (9, 0), triton=True), "comfy-kitchen"),
    ("fast", DeviceCaps("cpu"), "must be one of auto, dequantize, tensor"),
])
def test_a_recipe_the_device_cannot_run_is_refused_naming_the_fix(recipe, caps, message):
    with pytest.raises(ValueError, match=message):
        check(recipe, caps)


def test_set_fp8_matmul_refuses_before_changing_a_layer_and_keeps_full_precision_layers():
    model = torch.nn.Sequential(_layer(), _layer(128, 64))
    model[1].scaled_mm = False  # a layer its file marks full_precision_matrix_mult
    with pytest.raises(ValueError):
        set_fp8_matmul(model, "row", caps=DeviceCaps("cuda", (8, 0)))
    assert [m.recipe for m in model] == [None, None]
    assert set_fp8_matmul(model, "row") == "row"  # the CPU runs every recipe (PyTorch's reference kernel)
    assert [m.recipe for m in model] == ["row", None]
    assert set_fp8_matmul(model, "auto") == "dequantize" and fp8_modules(model)


def test_odd_sides_dequantise_whatever_the_recipe():
    layer = _layer(40, 24)
    layer.recipe = "row"
    x = _tokens(1, width=40)
    want = x @ layer.dequantized(torch.float32).T + layer.bias
    torch.testing.assert_close(layer(x), want, atol=1e-5, rtol=1e-5)


def test_the_command_line_refuses_a_recipe_the_device_cannot_run_before_loading(monkeypatch, capsys, tmp_path):
    from ltx2_core.__main__ import main

    monkeypatch.setattr(fp8_matmul, "device_caps", lambda device: DeviceCaps("cuda", (8, 0), triton=True))
    flags = ["--width", "64", "--height", "64", "--frames", "9", "--steps", "1", "--no-progress", "--fp8", "quantize",
             "--fp8-matmul", "row-fused", "--output", str(tmp_path / "out.mp4")]
    assert main(["generate", *flags]) == 2
    captured = capsys.readouterr()
    assert "model:" not in captured.out and "fp8 matmul 'row-fused' multiplies on fp8 tensor cores" in captured.err


def test_model_files_load_the_transformer_with_its_recipe():
    """What --fp8-matmul and the loader nodes' `fp8_matmul` input set (the demo quantised at load)."""
    from ltx2_core.model_files import ModelFiles

    model = ModelFiles(fp8="quantize", fp8_matmul="row").load("cpu").transformer
    layers = fp8_modules(model)
    assert layers and {layer.recipe for layer in layers.values()} == {"row"}
    assert all(layer.weight.dtype == FP8 for layer in layers.values())
