"""What the transformer's weights occupy once loaded, per storage format: counted on the meta model built as the
loader builds it (each linear the storage names becomes its format's layer with its scales; every other tensor in
the compute dtype), so the bytes are the parameters' and buffers' that `BlockStreamer.device_weight_bytes` counts on
the device. `memory.plan.transformer_weight_bytes` takes a storage as its `layers`.

A storage is a `LayerRule`: (module name, its `nn.Linear` on meta) -> the layer it loads as, or None (kept in the
dtype); a GGUF conversion's is a `GgufRule`, which `install` binds to the whole model first. The rules:
* `policy_layers(fmt)`: the quantisation policy's block linears (`quant.policy.BLOCK_LINEARS`) in a registered
  format, as ComfyUI's quantiser and fp8 "quantize" store them (int8 tensorwise / rowwise / ConvRot, MXFP8, fp8);
* `gguf_layers(mix)`: a GGUF conversion (ComfyUI-GGUF's tools/convert.py to BF16, then llama.cpp's llama-quantize
  with its tools/lcpp.patch; `docs/small_cards/gguf.md`): each tensor in the type `GgufMix.tensor_types` gives it
  (below). The loader keeps the block types as bytes (`GGUFLinear`) and dequantises the float ones into the dtype;
* `file_layers(path, mode)`: a file's own storage, from its header: a GGUF's per-tensor ggml types, a safetensors
  file's per-layer formats (`quant.files.read_formats`, as `load_transformer` reads them).

A GGUF conversion's types, as lcpp.patch makes llama-quantize choose them for `general.architecture` "ltxv" (read
there, not copied; the file's names are the DiT's own, in the file's order: sorted, as safetensors lists a
checkpoint's keys and convert.py writes them):
* not quantised, so kept as convert.py wrote them: every tensor whose name contains `adaln_single.` (each AdaLN,
  `audio_`, `prompt_` and `av_ca_*` ones included), `caption_projection.`, `patchify_proj.`, `proj_out.` or
  `scale_shift_table`, and every tensor that is not 2-D or whose name does not end in `weight` (biases, norms).
  convert.py keeps a bf16 source's 1-D tensors, those of at most 1,024 values and the `scale_shift_table`s in F32,
  the rest in BF16 (2.3: 0.86 GB of BF16 / F32 outside the blocks);
* quantised: the type's default (`GgufMix.base`), but names containing `.to_v.weight` or `.ff.net.2.weight` take
  the type's rule (`GgufMix.rules`): Q5_K_M and Q4_K_M put both in Q6_K; Q3_K_M the `to_v` in Q4_K (the first two in
  the file's order in Q5_K: block 0's video self- and cross-attention) and the video feed-forward's down projection
  in Q4_K; Q2_K the `to_v` in Q3_K (the _S / _L and legacy types: `GGUF_MIXES`). `audio_ff.net.2` does not contain
  `.ff.net.2.weight` and keeps the default;
* a K type (Q2_K ... Q6_K) on rows that are not whole 256-weight blocks falls back to F16.
"""

from __future__ import annotations

import math
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


# lcpp.patch's "ltxv" rules (see the module docstring): names that stay as converted, and the two names with rules
KEPT = ("adaln_single.", "caption_projection.", "patchify_proj.", "proj_out.", "scale_shift_table")
TO_V, FF_DOWN = ".to_v.weight", ".ff.net.2.weight"
SMALL = 1024  # convert.py keeps tensors of at most this many values in F32


class TypeRule(NamedTuple):
    """Tensors whose name contains `part` take `kind`; the first `first` of them in the file's order take
    `first_kind` instead (llama-quantize counts them as it goes)."""

    part: str
    kind: str
    first: int = 0
    first_kind: str = ""


class GgufMix(NamedTuple):
    """One llama-quantize type (its `ftype`): `base` for the quantised tensors, `rules` (the first whose part a
    name contains) before it."""

    base: str
    rules: tuple[TypeRule, ...] = ()

    def tensor_types(self, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, GgmlType]:
        """Each tensor's type in the file, from every tensor's name and torch shape (the counted rules need all)."""
        counts: dict[str, int] = {}
        types = {}
        for name in sorted(shapes):
            shape = shapes[name]
            if not quantised(name, shape):
                types[name] = converted(name, shape)
                continue
            kind = self.base
            if rule := next((r for r in self.rules if r.part in name), None):
                seen = counts[rule.part] = counts.get(rule.part, 0) + 1
                kind = rule.first_kind if seen <= rule.first else rule.kind
            kind = GGML[kind]
            types[name] = kind if shape[-1] % kind.block_size == 0 else GGML["F16"]
        return types


def quantised(name: str, shape: tuple[int, ...]) -> bool:
    """Whether llama-quantize with lcpp.patch quantises this tensor of an "ltxv" GGUF."""
    return len(shape) == 2 and name.endswith("weight") and not any(part in name for part in KEPT)


def converted(name: str, shape: tuple[int, ...]) -> GgmlType:
    """The type convert.py gives a tensor of a bf16 checkpoint (what a tensor llama-quantize keeps stays)."""
    small = len(shape) == 1 or math.prod(shape) <= SMALL or "scale_shift_table" in name
    return GGML["F32" if small else "BF16"]


def _mix(base: str, to_v: str | None = None, ff: str | None = None, first: tuple[int, str] = (0, "")) -> GgufMix:
    rules = ((TypeRule(TO_V, to_v or base, *first),) if to_v or first[0] else ()) + \
        ((TypeRule(FF_DOWN, ff),) if ff else ())
    return GgufMix(base, rules)


# llama-quantize's types for image models (lcpp.patch `img_tensor_get_type`; the IQ types are refused there), by
# the name the public files carry
GGUF_MIXES = {
    "Q8_0": _mix("Q8_0"), "Q6_K": _mix("Q6_K"),
    "Q5_K_M": _mix("Q5_K", "Q6_K", "Q6_K"), "Q5_K_S": _mix("Q5_K"),
    "Q5_1": _mix("Q5_1"), "Q5_0": _mix("Q5_0", ff="Q5_1"),
    "Q4_K_M": _mix("Q4_K", "Q6_K", "Q6_K"), "Q4_K_S": _mix("Q4_K", ff="Q5_K", first=(4, "Q5_K")),
    "Q4_1": _mix("Q4_1"), "Q4_0": _mix("Q4_0", ff="Q4_1"),
    "Q3_K_L": _mix("Q3_K", "Q5_K", "Q5_K"), "Q3_K_M": _mix("Q3_K", "Q4_K", "Q4_K", (2, "Q5_K")),
    "Q3_K_S": _mix("Q3_K"), "Q2_K": _mix("Q2_K", "Q3_K"),
}


def _gguf_mix(mix: GgufMix | str) -> GgufMix:
    return GGUF_MIXES.get(mix, GgufMix(mix)) if isinstance(mix, str) else mix


class GgufRule(NamedTuple):
    """A conversion's linears: `install` binds it to the whole model first (`for_model`), since its counted rules
    follow the file's order."""

    mix: GgufMix

    def for_model(self, model: nn.Module) -> LayerRule:
        types = self.mix.tensor_types(_shapes(model))

        def rule(name: str, linear: nn.Linear) -> nn.Module | None:
            kind = types[f"{name}.weight"]
            return GGUFLinear.like(linear, kind) if kind.quantised else None

        return rule


def gguf_layers(mix: GgufMix | str) -> GgufRule:
    """A conversion to `mix` (or the name of one of GGUF_MIXES, or a plain ggml type name: every quantised tensor
    in it)."""
    return GgufRule(_gguf_mix(mix))


def _shapes(model: nn.Module) -> dict[str, tuple[int, ...]]:
    return {name: tuple(t.shape) for name, t in model.state_dict().items()}


def gguf_file_bytes(model: nn.Module, mix: GgufMix | str) -> int:
    """The tensor bytes of `model`'s state (meta is enough) in a GGUF of `mix`: the file people download, its
    header aside (tens of KB)."""
    types = _gguf_mix(mix).tensor_types(shapes := _shapes(model))
    return sum(kind.row_bytes(shape[-1]) * math.prod(shape[:-1]) for kind, shape in
               ((types[name], shape) for name, shape in shapes.items()))


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


def install(model: nn.Module, layers: LayerRule | GgufRule) -> nn.Module:
    """Every linear of `model` (on meta) that `layers` names replaced by its layer; returns the model."""
    from ltx2_core.quant.format import replace_module

    layers = layers.for_model(model) if isinstance(layers, GgufRule) else layers
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


def layout_bytes(model: nn.Module, dtype: torch.dtype, layers: LayerRule | GgufRule | None,
                 blocks: str = "transformer_blocks") -> tuple[int, list[int], list[tuple]]:
    """(non-block bytes, each block's bytes, each block's kind) of a meta `model` in `dtype` stored by `layers`."""
    model = model.to(dtype)
    if layers is not None:
        install(model, layers)
    stack = list(getattr(model, blocks))
    each = [tensor_bytes(b) for b in stack]
    return tensor_bytes(model) - sum(each), each, [block_kind(b) for b in stack]
