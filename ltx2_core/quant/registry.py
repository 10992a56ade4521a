"""The quantised formats this package loads, and the questions asked of all of them at once.

Adding a format: one module implementing `quant.format.WeightFormat` and one line in `FORMATS`. Everything else
(detection, the loaders, tensor parallelism, the memory plan, LoRA fusion) reaches formats through the functions
here, which read `FORMATS` when called.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from torch import nn

from ltx2_core.loader.safetensors_file import SafetensorsFile
from ltx2_core.quant.format import WeightFormat
from ltx2_core.quant.fp8 import FP8_FORMAT
from ltx2_core.quant.gguf import GGUF_FORMAT
from ltx2_core.quant.int8 import INT8_CONVROT, INT8_ROWWISE, INT8_TENSORWISE
from ltx2_core.quant.mxfp8 import MXFP8_FORMAT
from ltx2_core.quant.nvfp4 import NVFP4_FORMAT

FORMATS: tuple[WeightFormat, ...] = (
    FP8_FORMAT,
    NVFP4_FORMAT,
    INT8_TENSORWISE,
    INT8_ROWWISE,
    *INT8_CONVROT,  # one per Hadamard group size
    MXFP8_FORMAT,
    GGUF_FORMAT,
)


class QuantModule(NamedTuple):
    """A module holding a quantised weight, and its format."""

    module: nn.Module
    format: WeightFormat


def supported() -> str:
    """What loads, for the messages that refuse a file."""
    return "bf16/fp16/fp32 checkpoints and " + ", and ".join(dict.fromkeys(f.loads for f in FORMATS))


def by_name(name: str) -> WeightFormat | None:
    """The format a file declares as `name` (comfy_quant / _quantization_metadata), None when none is loaded."""
    return next((f for f in FORMATS if f.name == name), None)


def declared(conf: Mapping, scale_shape: tuple[int, ...] | None = None,
             formats: Iterable[WeightFormat] | None = None) -> WeightFormat | None:
    """The format of a layer a file marks with the `comfy_quant` entry `conf` (e.g. {"format": "int8_tensorwise",
    "convrot": true}) and whose `weight_scale` has `scale_shape` (from the header; None: none stored): the first of
    `formats` (default FORMATS) with that name whose optional `declares(conf, scale_shape)` agrees."""
    name = str(conf.get("format"))
    return next((f for f in (FORMATS if formats is None else formats) if f.name == name
                 and getattr(f, "declares", lambda c, s: True)(conf, scale_shape)), None)


def format_of(module: nn.Module) -> WeightFormat | None:
    """The format of the weight `module` holds (None: not quantised)."""
    return next((f for f in FORMATS if f.owns(module)), None)


def quantised_modules(model: nn.Module) -> dict[str, QuantModule]:
    """Every module of `model` holding a quantised weight (layers and their tensor-parallel shards), by name."""
    found = {name: QuantModule(m, format_of(m)) for name, m in model.named_modules()}
    return {name: q for name, q in found.items() if q.format is not None}


def detect(file: SafetensorsFile) -> WeightFormat | None:
    """The format a file's weights are stored in, from the header alone: a format recognised by dtype, else (a file
    with ComfyUI's per-layer markers or `_quantization_metadata`) the first marked-only transformer format of a stored
    dtype; None: no quantised weight. What the memory plan counts; the per-layer plan is `quant.files`'."""
    dtypes = {entry.dtype for entry in file.tensors.values()}
    found = next((f for f in FORMATS if f.by_dtype and f.dtype in dtypes), None)
    marked = "_quantization_metadata" in file.metadata or any(k.endswith(".comfy_quant") for k in file.tensors)
    if found is None and marked:  # by the weights' dtype: markers and block scales may be U8 too
        weights = {entry.dtype for name, entry in file.tensors.items() if name.endswith(".weight")}
        found = next((f for f in FORMATS if not f.by_dtype and not f.weight_only and f.dtype in weights), None)
    return found
