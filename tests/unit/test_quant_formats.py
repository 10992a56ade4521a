"""The quantisation seam: the registry finds each format, and a toy format plugs in through the registry line only,
answering detection, loading, bytes, the tensor-parallel split and the LoRA rule through the calls the loaders, the
memory plan, tensor parallelism and LoRA fusion make."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

from ltx2_core.errors import UnsupportedQuantizationError
from ltx2_core.loader.lora import Lora, LoraPair, fuse_loras, fused_loras
from ltx2_core.loader.safetensors_file import read_header, read_tensors
from ltx2_core.parallel.tensor_parallel import RowParallelLinear
from ltx2_core.quant import registry
from ltx2_core.quant.files import StoredLayer, default_scales, install_layers, read_formats
from ltx2_core.quant.fp8 import FP8_FORMAT, FP8Linear
from ltx2_core.quant.nvfp4 import NVFP4_FORMAT
from ltx2_core.quant.policy import dequantize_model, weight_bytes


class ToyLinear(nn.Linear):
    """int8 weight, one fp32 scale: w = q · weight_scale."""

    def __init__(self, linear: nn.Linear) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = nn.Parameter(torch.empty_like(linear.weight, dtype=torch.int8), requires_grad=False)
        self.bias = linear.bias
        self.register_buffer("weight_scale", torch.ones((), device=linear.weight.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, TOY.dequantize(self, x.dtype), self.bias)


class ToyFormat:
    name, label, loads, dtype, by_dtype, weight_only = "toy_int8", "toy", "toy int8", "I8", True, False
    scales = ("weight_scale",)

    def rename(self, file, keys):
        return keys

    def defaults(self, present):
        return {}

    def layer(self, linear, present, matmul=None):
        return ToyLinear(linear)

    def owns(self, module):
        return getattr(module, "weight", None) is not None and module.weight.dtype == torch.int8

    def dequantize(self, module, dtype):
        return (module.weight.float() * module.weight_scale).to(dtype)

    def weight_bytes(self, count):
        return count + 4

    def shard_scales(self, module):
        return {"weight_scale": module.weight_scale}

    def fuse_(self, module, weight):
        scale = weight.abs().amax() / 127
        module.weight.copy_((weight / scale).round().to(torch.int8))
        module.weight_scale.copy_(scale)


TOY = ToyFormat()


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer, self.plain = nn.Linear(8, 4), nn.Linear(4, 4)


@pytest.fixture
def toy_file(tmp_path):
    q = torch.randint(-127, 128, (4, 8), generator=torch.Generator().manual_seed(0), dtype=torch.int8)
    tensors = {"layer.weight": q, "layer.weight_scale": torch.tensor(0.01), "layer.bias": torch.zeros(4),
               "plain.weight": torch.randn(4, 4), "plain.bias": torch.zeros(4)}
    save_file(tensors, str(tmp_path / "toy.safetensors"))
    return tmp_path / "toy.safetensors", tensors


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setattr(registry, "FORMATS", (*registry.FORMATS, TOY))  # the registry line


def _load(path):
    file = read_header(path)
    stored = read_formats(file, {k: k for k in file.tensors})
    with torch.device("meta"):
        model = Tiny()
    install_layers(model, stored, path)
    state = read_tensors(file, stored.keys, keep=stored.kept) | default_scales(stored, "cpu")
    model.load_state_dict(state, strict=True, assign=True)
    return model, stored


def test_the_registry_finds_each_format():
    assert registry.by_name("float8_e4m3fn") is FP8_FORMAT and registry.by_name("nvfp4") is NVFP4_FORMAT
    assert registry.format_of(FP8Linear.from_linear(nn.Linear(16, 16))) is FP8_FORMAT
    assert registry.format_of(nn.Linear(16, 16)) is None
    assert "float8_e4m3fn" in registry.supported() and "nvfp4" in registry.supported()


def test_an_unregistered_format_is_refused(toy_file):
    with pytest.raises(UnsupportedQuantizationError, match="quantised as int8"):
        _load(toy_file[0])


def test_a_registered_toy_format_is_detected_and_loads(toy_file, registered):
    path, tensors = toy_file
    assert registry.detect(read_header(path)) is TOY
    model, stored = _load(path)
    assert stored.layers == {"layer": StoredLayer(TOY, frozenset({"weight_scale"}))}
    assert type(model.layer) is ToyLinear and type(model.plain) is nn.Linear
    x = torch.randn(3, 8)
    torch.testing.assert_close(model.layer(x), x @ (tensors["layer.weight"].float() * 0.01).T)
    assert "float8_e4m3fn" in registry.supported() and "toy int8" in registry.supported()


def test_the_toy_format_answers_bytes_tp_and_lora(toy_file, registered):
    assert weight_bytes("transformer_blocks.0.attn1.to_q.weight", 64, 2, 2, TOY) == 32 + 4
    assert weight_bytes("transformer_blocks.0.attn1.to_q.bias", 64, 2, 2, TOY) == 64
    model, _ = _load(toy_file[0])
    whole = TOY.dequantize(model.layer, torch.float32)
    shard = RowParallelLinear(model.layer, slice(0, 4), group=None)
    assert registry.format_of(shard) is TOY and shard.weight_scale is model.layer.weight_scale
    torch.testing.assert_close(TOY.dequantize(shard, torch.float32), whole[:, :4])

    pair = LoraPair(torch.randn(2, 8), torch.randn(4, 2), 0.5)
    lora = Lora("toy", {"layer.weight": pair})
    before = (model.layer.weight.clone(), model.layer.weight_scale.clone())
    with fused_loras(model, [(lora, 1.0)]):
        fused = TOY.dequantize(model.layer, torch.float32)
        torch.testing.assert_close(fused, whole + 0.5 * pair.up @ pair.down, atol=0.05, rtol=0)
    assert torch.equal(model.layer.weight, before[0]) and torch.equal(model.layer.weight_scale, before[1])
    assert fuse_loras(model, [(lora, 1.0)]) == ["layer.weight"] and registry.format_of(model.layer) is TOY

    assert dequantize_model(model, torch.float32) == 1 and type(model.layer) is nn.Linear
