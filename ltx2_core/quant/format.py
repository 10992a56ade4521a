"""The seam every quantised weight format implements: what the loader, tensor parallelism, the memory plan and LoRA
fusion ask of a format, so none of them tests for fp8 or nvfp4 itself.

A format is one way a checkpoint stores a linear layer: `<layer>.weight` in the format's safetensors dtype, beside
it the format's scale tensors (`<layer>.weight_scale`, ...), declared per layer by ComfyUI's `comfy_quant` marker or
the header's `_quantization_metadata` (under the format's `name`), or recognised by the weight's dtype alone. The
formats this package loads are listed in `quant.registry.FORMATS`; a new one is one module implementing
`WeightFormat` plus one line there. Formats sharing one declared name (ComfyUI's int8 variants, all
"int8_tensorwise") also define `declares(conf, scale_shape) -> bool`: whether a layer marked with the JSON `conf`
and a stored `weight_scale` of `scale_shape` is theirs (`registry.declared`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

import torch
from torch import nn

from ltx2_core.loader.safetensors_file import SafetensorsFile


class WeightFormat(Protocol):
    """One quantised storage of a linear layer's (out, in) weight (see the module docstring)."""

    name: str  # as files declare it (comfy_quant / _quantization_metadata), e.g. "float8_e4m3fn"
    label: str  # what its files are called in messages, e.g. "fp8"
    loads: str  # what the refusal messages say this package loads of it
    dtype: str  # the safetensors dtype of `<layer>.weight`, e.g. "F8_E4M3"
    by_dtype: bool  # a weight stored as `dtype` is this format without a marker (not so for U8: markers are U8 too)
    scales: tuple[str, ...]  # the tensors beside `<layer>.weight` (suffixes), read as stored and never cast
    weight_only: bool  # runs only dequantised per call, without a TP split: text encoders only
    # LoRA rule: True, the LoRA's factors ride beside the stored bytes and are added after dequantisation at each call
    # (`quant.low_rank`: attach / detach exact, nothing requantised); False, `fuse_` stores the updated weight (fp8,
    # as the reference). A format without the attribute counts as False.
    lora_per_call: bool

    def rename(self, file: SafetensorsFile, keys: dict[str, str]) -> dict[str, str]:
        """Model key -> file key with the format's bookkeeping keys dropped and older scale names mapped."""
        ...

    def defaults(self, present: Collection[str]) -> dict[str, float]:
        """The scales (suffix -> value) a file may leave out, given the `present` ones; filled in at load."""
        ...

    def layer(self, linear: nn.Linear, present: Collection[str], matmul: bool | None = None) -> nn.Module:
        """The empty layer holding `linear`'s weight in this format (on `linear`'s device, e.g. `meta`), with the
        `present` scales; `matmul`: multiply in the format (True), dequantise per call (False), by device (None)."""
        ...

    def owns(self, module: nn.Module) -> bool:
        """Whether `module` holds a weight of this format with its scales (the layer, or a tensor-parallel shard)."""
        ...

    def dequantize(self, module: nn.Module, dtype: torch.dtype) -> torch.Tensor:
        """The (out, in) weight of an owned module in `dtype`."""
        ...

    def weight_bytes(self, count: int) -> int:
        """Bytes of a stored matrix of `count` weights, with its scales (the memory plan)."""
        ...

    def shard_scales(self, module: nn.Module) -> dict[str, torch.Tensor | None]:
        """Tensor parallelism: the scales a rank keeps, whole, beside its slice of an owned module's weight (rows or
        columns; names as in the state dict). Raises UnsupportedQuantizationError for a format that cannot be cut."""
        ...

    def fuse_(self, module: nn.Module, weight: torch.Tensor) -> None:
        """LoRA, once per stage: stores the updated (out, in) fp32 `weight` (dequantised weight + delta) into an owned
        module, in place (requantised). What `loader.lora` calls for formats without `lora_per_call`; raises
        UnsupportedQuantizationError for a format that cannot requantise."""
        ...


def replace_module(model: nn.Module, name: str, module: nn.Module) -> None:
    """Puts `module` at the dotted path `name` of `model` (a format's layer in place of a linear, or back)."""
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, child, module)
