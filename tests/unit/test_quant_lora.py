"""LoRAs on quantised weights (GGUF, int8 tensorwise / rowwise / ConvRot, MXFP8, NVFP4) added after dequantisation at
each call (`quant.low_rank`): a layer with a LoRA equals its dequantised weight plus the delta, strength 0 gives
exactly the base output, a stage's LoRA attaches for the stage and detaches after with the quantised bytes untouched
(also through the pipeline's stage fusion), and the forward never reads the device on the host."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from support.census import OpCensus
from torch import nn

gguf = pytest.importorskip("gguf")
pytest.importorskip("comfy_kitchen")

from ltx2_core.demo import demo_inputs, demo_lora
from ltx2_core.demo.models import demo_models
from ltx2_core.loader.lora import Lora, LoraPair, fuse_loras, fused_loras
from ltx2_core.pipeline import LocalSampler, Request, check_request, sample_request
from ltx2_core.quant import kitchen, low_rank
from ltx2_core.quant.format import replace_module
from ltx2_core.quant.gguf import GGUFLinear
from ltx2_core.quant.gguf_types import TYPES
from ltx2_core.quant.int8 import INT8_CONVROT, INT8_ROWWISE, INT8_TENSORWISE
from ltx2_core.quant.mxfp8 import MXFP8_FORMAT
from ltx2_core.quant.nvfp4 import NVFP4_FORMAT
from ltx2_core.quant.policy import BLOCK_LINEARS, dequantize_model
from ltx2_core.quant.registry import format_of, quantised_modules

GGML = {t.name: t for t in TYPES.values()}
CONVROT16 = next(f for f in INT8_CONVROT if f.convrot == 16)
FORMATS = ["gguf_q8_0", "gguf_q4_0", "gguf_f16", "int8_tensorwise", "int8_rowwise", "int8_convrot", "mxfp8", "nvfp4"]


def quantised_layer(linear: nn.Linear, fmt: str) -> nn.Module:
    """`linear` stored in `fmt` as the files store it (gguf's own quantiser, comfy-kitchen's for the others)."""
    w = linear.weight.detach().float()
    bias = {} if linear.bias is None else {"bias": linear.bias.detach().clone()}
    if fmt.startswith("gguf"):
        kind = GGML[fmt[5:].upper()]
        data = w.half().view(torch.uint8) if kind.name == "F16" else \
            torch.from_numpy(gguf.quants.quantize(w.numpy(), gguf.GGMLQuantizationType[kind.name]))
        layer = GGUFLinear.like(linear, kind)
        layer.load_state_dict({"weight": data.reshape(w.shape[0], -1).contiguous(), **bias}, assign=True)
        return layer
    if fmt == "nvfp4":
        q, s, scale = kitchen.quantize_nvfp4(w)
        layer = NVFP4_FORMAT.layer(linear, {"weight_scale", "weight_scale_2"}, matmul=False)
        layer.load_state_dict({"weight": q, "weight_scale": s, "weight_scale_2": scale, **bias}, assign=True)
        return layer
    if fmt == "mxfp8":
        q, s = kitchen.quantize_mxfp8(w)
        layer = MXFP8_FORMAT.layer(linear, {"weight_scale"}, matmul=False)
        layer.load_state_dict({"weight": q, "weight_scale": s.view(torch.float8_e8m0fnu), **bias}, assign=True)
        return layer
    int8 = {"int8_tensorwise": INT8_TENSORWISE, "int8_rowwise": INT8_ROWWISE, "int8_convrot": CONVROT16}[fmt]
    q, s = kitchen.quantize_int8(w, int8.rows, int8.convrot)
    layer = int8.layer(linear, {"weight_scale"}, matmul=False)
    layer.load_state_dict({"weight": q, "weight_scale": s.reshape(layer.weight_scale.shape), **bias}, assign=True)
    return layer


def quantise_blocks(model: nn.Module, fmt: str) -> int:
    """The blocks' attention projections and feed-forwards of `model` in `fmt` where their inputs take its blocks
    (GGUF: rows of whole 32-weight blocks, else F16 as the conversions do; ConvRot: groups of 16)."""
    count = 0
    for name, module in list(model.named_modules()):
        if type(module) is nn.Linear and name.startswith("transformer_blocks.") and name.endswith(BLOCK_LINEARS):
            kind = fmt
            if module.in_features % 32 and fmt.startswith("gguf"):
                kind = "gguf_f16"
            elif module.in_features % 16 and fmt == "int8_convrot":
                continue
            replace_module(model, name, quantised_layer(module, kind))
            count += 1
    return count


def _stored(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every quantised layer's stored tensors (bytes and scales), copied."""
    return {name: tensor.clone() for name, tensor in model.state_dict().items()
            if name.rsplit(".", 1)[0] in quantised_modules(model)}


@pytest.mark.parametrize("rows", [3, 200], ids=["activation-product", "weight-sum"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_a_quantised_layer_with_a_lora_equals_its_dequantised_weight_plus_the_delta(fmt, rows):
    """fp32, within 1e-5 of max |y|: the same dequantisation, the delta added either to the activations' product
    (few rows) or to the weight (rows past in·out/(in+out) = 40 here); only summation order differs."""
    gen = torch.Generator().manual_seed(0)
    linear = nn.Linear(128, 160)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(160, 128, generator=gen) * 0.05)
    layer = quantised_layer(linear, fmt)
    fmt_ = format_of(layer)
    assert fmt_.lora_per_call
    pairs = [LoraPair(torch.randn(8, 128, generator=gen) * 0.05, torch.randn(160, 8, generator=gen) * 0.05, 0.5),
             LoraPair(torch.randn(4, 128, generator=gen) * 0.05, torch.randn(160, 4, generator=gen) * 0.05, 2.0)]
    model = nn.Sequential(layer)
    x = torch.randn(rows, 128, generator=gen)
    base = model(x)
    bytes_before = _stored(model)
    loras = [(Lora("a", {"0.weight": pairs[0]}), 0.8), (Lora("b", {"0.weight": pairs[1]}), -0.3)]
    with fused_loras(model, loras):
        got = model(x)
        dense = fmt_.dequantize(layer, torch.float32) + 0.8 * 0.5 * pairs[0].up @ pairs[0].down \
            - 0.3 * 2.0 * pairs[1].up @ pairs[1].down
        want = torch.nn.functional.linear(x, dense, linear.bias)
        torch.testing.assert_close(got, want, atol=1e-5 * want.abs().max().item(), rtol=0)
        assert not torch.allclose(got, base)  # the LoRA changes the output
        assert all(torch.equal(t, bytes_before[n]) for n, t in _stored(model).items())  # bytes untouched
    after = model(x)
    assert torch.equal(after, base) and low_rank.attached(layer) is None  # detached exactly


@pytest.mark.parametrize("fmt", ["int8_tensorwise", "int8_rowwise", "int8_convrot"])
def test_the_int8_matmul_path_adds_the_lora_to_its_product(fmt):
    """matmul=True (int8 tensor cores, what CUDA devices pick): the base is comfy-kitchen's int8_linear, the LoRA's
    product is added to it (fp32, 1e-6: the same two terms)."""
    gen = torch.Generator().manual_seed(4)
    layer = quantised_layer(nn.Linear(64, 48), fmt)
    layer.matmul = True
    x = torch.randn(2, 7, 64, generator=gen)
    base = layer(x)
    pair = LoraPair(torch.randn(4, 64, generator=gen) * 0.1, torch.randn(48, 4, generator=gen) * 0.1, 0.5)
    model = nn.Sequential(layer)
    with fused_loras(model, [(Lora("l", {"0.weight": pair}), 0.9)]):
        torch.testing.assert_close(layer(x), base + 0.45 * (x @ pair.down.T) @ pair.up.T, atol=1e-6, rtol=1e-6)
    assert torch.equal(layer(x), base)


@pytest.mark.parametrize("fmt, product", [("mxfp8", "mxfp8_linear"), ("nvfp4", "nvfp4_linear")])
def test_the_mxfp8_and_nvfp4_tensor_core_paths_add_the_lora_to_their_product(fmt, product, monkeypatch):
    """matmul=True (compute capability ≥ 10): the LoRA's product is added to the scaled-matmul result (the CPU has
    no swizzled scaled matmul: the product is stood in for by the dequantised one, as test_kitchen_formats does)."""
    gen = torch.Generator().manual_seed(5)
    layer = quantised_layer(nn.Linear(64, 48), fmt)
    layer.matmul = True
    called = []

    def stand_in(x, *args):
        called.append(product)
        return torch.nn.functional.linear(x, layer.dequantized(x.dtype), layer.bias)

    monkeypatch.setattr(kitchen, product, stand_in)
    x = torch.randn(2, 7, 64, generator=gen)
    base = layer(x)
    pair = LoraPair(torch.randn(4, 64, generator=gen) * 0.1, torch.randn(48, 4, generator=gen) * 0.1, 0.5)
    with fused_loras(nn.Sequential(layer), [(Lora("l", {"0.weight": pair}), 0.9)]):
        torch.testing.assert_close(layer(x), base + 0.45 * (x @ pair.down.T) @ pair.up.T, atol=1e-6, rtol=1e-6)
    assert torch.equal(layer(x), base) and called == [product] * 3


@pytest.mark.parametrize("fmt", FORMATS)
def test_strength_zero_gives_exactly_the_base_output(fmt):
    """torch.equal: a strength-0 LoRA attaches nothing (the quantised bytes are never written), so the forward is
    the base forward, also beside a load-time LoRA."""
    gen = torch.Generator().manual_seed(1)
    model = nn.Sequential(quantised_layer(nn.Linear(64, 96), fmt))
    x = torch.randn(5, 64, generator=gen)
    pair = LoraPair(torch.randn(4, 64, generator=gen), torch.randn(96, 4, generator=gen), 1.0)
    lora = Lora("zero", {"0.weight": pair})
    base = model(x)
    with fused_loras(model, [(lora, 0.0)]):
        assert torch.equal(model(x), base)
    fuse_loras(model, [(lora, 0.5)])  # a load's LoRA, kept
    loaded = model(x)
    with fused_loras(model, [(lora, 0.0)]):
        assert torch.equal(model(x), loaded)
    with fused_loras(model, [(lora, 1.0)]):
        assert not torch.equal(model(x), loaded)
    assert torch.equal(model(x), loaded)  # the stage's detached, the load's kept


def test_strength_zero_leaves_fp8_and_plain_weights_untouched():
    """fp8 keeps the reference's requantising fusion, yet strength 0 is exactly the base (torch.equal): an update
    of strength 0 is dropped before any weight is touched, so nothing is requantised."""
    from ltx2_core.quant.fp8 import FP8Linear

    gen = torch.Generator().manual_seed(6)
    model = nn.Sequential(FP8Linear.from_linear(nn.Linear(64, 32)), nn.Linear(32, 16))
    x = torch.randn(3, 64, generator=gen)
    pairs = {"0.weight": LoraPair(torch.randn(2, 64, generator=gen), torch.randn(32, 2, generator=gen), 1.0),
             "1.weight": LoraPair(torch.randn(2, 32, generator=gen), torch.randn(16, 2, generator=gen), 1.0)}
    base, state = model(x), {k: v.clone() for k, v in model.state_dict().items()}
    with fused_loras(model, [(Lora("zero", pairs), 0.0)]):
        assert torch.equal(model(x), base)
        assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    with fused_loras(model, [(Lora("one", pairs), 1.0)]):
        assert not torch.equal(model(x), base)
    assert torch.equal(model(x), base)


def test_folding_a_quantised_layer_keeps_its_lora():
    """`dequantize_model` turns a layer with attached factors into the plain layer of weight + delta."""
    gen = torch.Generator().manual_seed(2)
    model = nn.Sequential(quantised_layer(nn.Linear(64, 32), "int8_rowwise"))
    pair = LoraPair(torch.randn(2, 64, generator=gen), torch.randn(32, 2, generator=gen), 0.5)
    fuse_loras(model, [(Lora("l", {"0.weight": pair}), 1.0)])
    x = torch.randn(3, 64, generator=gen)
    want = model(x)
    assert dequantize_model(model, torch.float32) == 1 and type(model[0]) is nn.Linear
    torch.testing.assert_close(model(x), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fmt", ["gguf_q8_0", "int8_rowwise", "mxfp8"])
def test_a_forward_with_a_lora_on_quantised_blocks_never_syncs(fmt):
    models = demo_models("2.3")
    model = models.transformer
    lora = demo_lora(model, seed=3)
    assert quantise_blocks(model, fmt) > 0
    fuse_loras(model, [(lora, 0.7)])
    assert all(low_rank.attached(q.module, "lora") is not None for q in quantised_modules(model).values())
    inputs = demo_inputs(model, text_tokens=7)
    with OpCensus() as census:
        model(*inputs)  # the tiny layers' calls have more rows than their crossover: U·D added to the weight
    assert census.syncs() == {}, census.syncs()
    assert census.transfers() == 0
    layer = nn.Sequential(quantised_layer(nn.Linear(256, 256), fmt))
    fuse_loras(layer, [(Lora("l", {"0.weight": LoraPair(torch.randn(4, 256), torch.randn(256, 4), 1.0)}), 0.5)])
    x = torch.randn(2, 256)
    with OpCensus() as census:
        layer(x)  # 2 rows: the activations' low-rank product
    assert census.syncs() == {} and census.transfers() == 0


class RecordingSampler:
    """`LocalSampler` noting, per transformer forward, the stage, whether the quantised bytes are the loaded ones,
    and the stage factors each quantised layer carries."""

    def __init__(self, model: nn.Module) -> None:
        self.inner, self.config, self.device = LocalSampler(model), model.config, torch.device("cpu")
        self.stage, self.stages, self.forwards = None, [], []
        loaded, layers = _stored(model), quantised_modules(model)
        model.register_forward_pre_hook(lambda module, args: self.forwards.append((
            self.stage, all(torch.equal(t, loaded[n]) for n, t in _stored(module).items()),
            {name: low_rank.attached(q.module) for name, q in layers.items()})))

    def __call__(self, positive, negative, latent, stage, generator, *, progress=None):
        self.stage = stage.name
        self.stages.append((stage, latent))
        return self.inner(positive, negative, latent, stage, generator, progress=progress)


@pytest.mark.parametrize("fmt", ["gguf_q8_0", "int8_rowwise"])
def test_two_stages_distilled_lora_attaches_for_stage_two_only_on_a_quantised_model(fmt):
    """Two-stage's distilled LoRA (stage 2's `Stage.loras`, fused by `LocalSampler`) rides beside the quantised
    layers in stage 2 only; every forward sees the loaded bytes; after the run nothing is attached; and the stage
    sampled again with its LoRA at strength 0 gives exactly the stage without it (torch.equal: nothing attached)."""
    models = demo_models("2.3")
    distilled = models.distilled_lora  # made on the dense model (its shapes), as the released one is
    assert quantise_blocks(models.transformer, fmt) > 0
    layers = quantised_modules(models.transformer)
    loaded = _stored(models.transformer)
    request = Request("a dancer", width=128, height=128, frames=9, fps=24.0, mode="two-stage", steps=2)
    check_request(request, models)
    sampler = RecordingSampler(models.transformer)
    positive, negative = models.prompt_encoder.encode(request.prompt, "noise")
    sample_request(request, models, positive, negative, sampler=sampler)
    assert {stage for stage, _, _ in sampler.forwards} == {"stage 1", "stage 2"}
    assert all(exact for _, exact, _ in sampler.forwards)
    for stage, _, factors in sampler.forwards:
        if stage == "stage 1":
            assert all(f is None for f in factors.values())
        else:
            for name, f in factors.items():
                pair = distilled.pairs[name + ".weight"]
                assert torch.equal(f.down, pair.down) and torch.equal(f.up, pair.up * pair.scale)
    assert all(low_rank.attached(q.module) is None for q in layers.values())
    assert all(torch.equal(t, loaded[n]) for n, t in _stored(models.transformer).items())

    stage2, latent = sampler.stages[-1]  # stage 2 again from its latent: without its LoRA, at strength 0, at 1
    assert [lora for lora, _ in stage2.loras] == [distilled]
    runs = [sampler.inner(positive, None, latent, replace(stage2, loras=loras), torch.Generator().manual_seed(1))
            for loras in ((), ((distilled, 0.0),), ((distilled, 1.0),))]
    assert torch.equal(runs[0].video, runs[1].video) and torch.equal(runs[0].audio, runs[1].audio)
    assert not torch.equal(runs[0].video, runs[2].video)


def test_streamed_quantised_blocks_keep_a_loads_lora_and_take_a_stages():
    """A load's LoRA attached before the blocks stream travels with its block; a stage's attaches beside it on the
    streamer's device and detaches after: the streamed model computes what the resident one does (equal: the same
    ops on the same values), before, during and after the stage."""
    from copy import deepcopy

    from ltx2_core.memory.streaming import stream_blocks

    models = demo_models("2.3")
    model = models.transformer
    load, stage = demo_lora(model, seed=3), demo_lora(model, seed=4)
    assert quantise_blocks(model, "int8_rowwise") > 0
    fuse_loras(model, [(load, 0.5)])
    streamed = deepcopy(model)
    streamer = stream_blocks(streamed, "cpu", resident=1)
    assert any(name.endswith(".lora_down") for name in streamer.blocks[0].names)  # streamed with its block
    inputs = demo_inputs(model, text_tokens=7)
    runs = []
    for which in (model, streamed):
        before = which(*inputs)
        with fused_loras(which, [(stage, 0.8)]):
            during = which(*inputs)
        runs.append((before, during, which(*inputs)))
    for got, want in zip(runs[1], runs[0]):
        assert all(torch.equal(a, b) for a, b in zip(got, want))
    assert not torch.equal(runs[0][0][0], runs[0][1][0]) and all(
        torch.equal(a, b) for a, b in zip(runs[0][0], runs[0][2]))
