"""What the transformer's weights occupy once loaded, per storage format: counted on the meta model built as the
loader builds it (each linear the storage names becomes its format's layer with its scales; every other tensor in
the compute dtype), so the bytes are the parameters' and buffers' that `BlockStreamer.device_weight_bytes` counts on
the device. `memory.plan.transformer_weight_bytes` takes a storage as its `layers`.

A storage is a `LayerRule`: (module name, its `nn.Linear` on meta) -> the layer it loads as, or None (kept in the
dtype). The rules:
* `policy_layers(fmt)`: the quantisation policy's block linears (`quant.policy.BLOCK_LINEARS`) in a registered
  format, as ComfyUI's quantiser and fp8 "quantize" store them (int8 tensorwise / rowwise / ConvRot, MXFP8, fp8);
* `gguf_layers(mix)`: a GGUF conversion (ComfyUI-GGUF's convert.py, then llama.cpp's llama-quantize with its
  lcpp.patch; `docs/small_cards/gguf.md`): every linear weight in the mix's type for its name when its rows are
  whole blocks of that type, else F16; 1-D tensors and the AdaLN tables F32. The loader keeps the block types as
  bytes (`GGUFLinear`) and dequantises the float ones into the dtype;
* `file_layers(path, mode)`: a file's own storage, from its header: a GGUF's per-tensor ggml types, a safetensors
  file's per-layer formats (`quant.files.read_formats`, as `load_transformer` reads them).

The _M mixes of llama-quantize for image models (the patch lets `.to_v.weight` take llama's `attn_v` rules; no other
rule matches LTX's names): Q5_K_M and Q4_K_M keep every `to_v` in Q6_K, Q3_K_M in Q4_K (its first two in Q5_K, not
modelled: under 0.1 % of the file), Q2_K in Q3_K (llama's rule for models without grouped-query attention).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import NamedTuple

import torch
from torch import nn

from ltx2_core.loader.gguf_file import transformer_tensors
from ltx2_core.loader.gguf_reader import is_gguf, read_gguf
from ltx2_core.quant.format import WeightFormat
from ltx2_core.quant.gguf import GGUFLinear
from ltx2_core.quant.gguf_types import TYPES, GgmlType
from ltx2_core.quant.policy import QUANTIZE_TO, quantised_linear

LayerRule = Callable[[str, nn.Linear], "nn.Module | None"]
GGML = {t.name: t for t in TYPES.values()}


def policy_layers(fmt: WeightFormat, present: tuple[str, ...] | None = None) -> LayerRule:
    """The policy's block linears in `fmt`, with the scales in `present` (default: the format's, but an input
    scale, which quantisers do not write)."""
    scales = tuple(s for s in fmt.scales if s != "input_scale") if present is None else present

    def rule(name: str, linear: nn.Linear) -> nn.Module | None:
        return fmt.layer(linear, scales, False) if quantised_linear(name) else None

    return rule


class GgufMix(NamedTuple):
    """A GGUF file's type choice: `base` for the linear weights, `overrides` (name suffix -> type) before it."""

    base: str
    overrides: tuple[tuple[str, str], ...] = ()

    def kind(self, name: str, in_features: int) -> GgmlType:
        """The type of linear `name`'s weight with rows of `in_features` (F16 when they are not whole blocks)."""
        kind = GGML[next((t for suffix, t in self.overrides if name.endswith(suffix)), self.base)]
        return kind if in_features % kind.block_size == 0 else GGML["F16"]


# the GGUF files of the public conversions, by the name their files carry (see the module docstring)
GGUF_MIXES = {
    "Q8_0": GgufMix("Q8_0"), "Q6_K": GgufMix("Q6_K"),
    "Q5_K_M": GgufMix("Q5_K", ((".to_v", "Q6_K"),)), "Q4_K_M": GgufMix("Q4_K", ((".to_v", "Q6_K"),)),
    "Q3_K_M": GgufMix("Q3_K", ((".to_v", "Q4_K"),)), "Q2_K": GgufMix("Q2_K", ((".to_v", "Q3_K"),)),
}


def gguf_layers(mix: GgufMix | str) -> LayerRule:
    """A conversion to `mix` (or the name of one of GGUF_MIXES, or a plain ggml type name: every linear in it)."""
    mix = GGUF_MIXES.get(mix, GgufMix(mix)) if isinstance(mix, str) else mix

    def rule(name: str, linear: nn.Linear) -> nn.Module | None:
        kind = mix.kind(name, linear.in_features)
        return GGUFLinear.like(linear, kind) if kind.quantised else None

    return rule


def _named(layers: Mapping[str, Callable[[nn.Linear], nn.Module]]) -> LayerRule:
    return lambda name, linear: layers[name](linear) if name in layers else None


def file_layers(path: str | os.PathLike, mode: str = "auto") -> LayerRule | None:
    """How `load_transformer(path, fp8=mode)` stores the linears (None: all in the dtype), from the header alone:
    a GGUF's block-type linear weights as `GGUFLinear`s, a safetensors file's quantised layers in their formats,
    and with "quantize" the policy's other linears in fp8; "dequantize": none."""
    from ltx2_core.loader.checkpoint import transformer_keys
    from ltx2_core.loader.layouts import transformer_layout
    from ltx2_core.loader.safetensors_file import read_header
    from ltx2_core.loader.sources import Component, component_source
    from ltx2_core.quant.files import read_formats

    if mode == "dequantize":
        return None
    source = component_source(path, Component.TRANSFORMER)  # a path, or a model's Source
    if is_gguf(source.path):
        file = read_gguf(source.path)
        keys = transformer_tensors(file)
        kinds = {key[: -len(".weight")]: file.tensors[file_key].kind for key, file_key in keys.items()
                 if key.endswith(".weight") and file.tensors[file_key].kind.quantised}
        return _named({name: lambda linear, k=kind: GGUFLinear.like(linear, k) for name, kind in kinds.items()})
    file = read_header(source.path)
    stored = read_formats(file, transformer_keys(file.tensors, transformer_layout(file, source.prefix).prefix))
    named = _named({name: lambda linear, s=layer: s.format.layer(linear, s.present, False)
                    for name, layer in stored.layers.items()})
    if mode != "quantize":
        return named if stored.layers else None
    quantize = policy_layers(QUANTIZE_TO)
    return lambda name, linear: named(name, linear) or quantize(name, linear)


def install(model: nn.Module, layers: LayerRule) -> nn.Module:
    """Every linear of `model` (on meta) that `layers` names replaced by its layer; returns the model."""
    from ltx2_core.quant.format import replace_module

    for name, module in list(model.named_modules()):
        if type(module) is nn.Linear and (layer := layers(name, module)) is not None:
            replace_module(model, name, layer)
    return model


def tensor_bytes(module: nn.Module) -> int:
    """Bytes of a module's parameters and buffers (what the streamer moves and the device holds)."""
    tensors = [*module.parameters(), *(b for b in module.buffers() if b is not None)]
    return sum(t.numel() * t.element_size() for t in tensors)


def block_kind(block: nn.Module) -> tuple:
    """What makes two blocks share the streamer's slots: their tensors' names, shapes and dtypes."""
    tensors = dict(block.named_parameters()) | {n: b for n, b in block.named_buffers() if b is not None}
    return tuple((name, tuple(t.shape), t.dtype) for name, t in tensors.items())


def layout_bytes(model: nn.Module, dtype: torch.dtype, layers: LayerRule | None,
                 blocks: str = "transformer_blocks") -> tuple[int, list[int], list[tuple]]:
    """(non-block bytes, each block's bytes, each block's kind) of a meta `model` in `dtype` stored by `layers`."""
    model = model.to(dtype)
    if layers is not None:
        install(model, layers)
    stack = list(getattr(model, blocks))
    each = [tensor_bytes(b) for b in stack]
    return tensor_bytes(model) - sum(each), each, [block_kind(b) for b in stack]
