"""Which tensors of a checkpoint are quantised, and in which registered format, read from the header (and ComfyUI's
small `comfy_quant` tensors) before any weight; then the model's linears swapped for the formats' layers on `meta`.

The layouts LTX-2 files come in:
* official (`ltx-2-19b-dev-fp8`, `ltx-2.3-22b-dev-fp8`): `<layer>.weight` float8_e4m3fn, `<layer>.weight_scale` (0-d
  fp32, w = q · scale) and `<layer>.input_scale` (0-d fp32); everything else bf16;
* ComfyUI (fp8_scaled, fp4_mixed): the same, marked per layer by `<layer>.comfy_quant`, a uint8 tensor holding JSON
  such as {"format": "float8_e4m3fn"} (or by the header's `_quantization_metadata`), or the older `scaled_fp8`
  marker key with `<layer>.scale_weight` / `<layer>.scale_input`;
* fp8 weights without a scale (a plain cast): scale 1.

A layer is in a format when it is marked so, or (formats recognised by dtype) when its weight has the format's dtype.
ComfyUI's int8 (tensorwise, rowwise, ConvRot; all marked "int8_tensorwise", told apart by the scale's shape and the
marker's "convrot") and mxfp8 layers are marked per layer and load through comfy-kitchen (`quant.int8`,
`quant.mxfp8`). Other formats (float8_e5m2, unmarked int8) are refused naming the ones
that load; GGUF files are not safetensors and are refused by the header check.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import torch
from torch import nn

from ltx2_core.errors import UnsupportedQuantizationError
from ltx2_core.loader.safetensors_file import SafetensorsFile, read_tensors
from ltx2_core.quant import registry
from ltx2_core.quant.format import WeightFormat, replace_module

# stored dtypes that mean a quantised weight, named when no loaded format claims them
_QUANTISED_DTYPES = {"F8_E5M2": "float8_e5m2", "I8": "int8", "U8": "packed 4-bit (nvfp4/mxfp4)"}


class StoredLayer(NamedTuple):
    """A quantised linear of a file: its format, which of the format's scales the file stores (suffixes), and
    whether its marker asks for `full_precision_matrix_mult` (ComfyUI then dequantises rather than multiplying in the
    format: comfy/ops.py)."""

    format: WeightFormat
    present: frozenset[str]
    full_precision: bool = False


class StoredFormats(NamedTuple):
    """How a file stores a model's linears. layers: module name -> StoredLayer; keys: model key -> file key with
    the bookkeeping keys dropped and older scale names mapped."""

    layers: dict[str, StoredLayer]
    keys: dict[str, str]

    @property
    def kept(self) -> set[str]:
        """The model keys read as they are stored (quantised weights and their scales), never cast."""
        return {f"{m}.{suffix}" for m, layer in self.layers.items() for suffix in ("weight", *layer.format.scales)}

    @classmethod
    def union(cls, parts: Iterable[StoredFormats]) -> StoredFormats:
        """One model's layers stored over several files (a sharded Hugging Face folder)."""
        parts = list(parts)
        return cls({k: v for p in parts for k, v in p.layers.items()}, {k: v for p in parts for k, v in p.keys.items()})


def read_formats(file: SafetensorsFile, keys: Mapping[str, str], weight_only: bool = False) -> StoredFormats:
    """The quantised layers of a file among `keys` (model key -> file key); `weight_only` also accepts the formats
    that run only dequantised (text encoders). Every other format is refused naming what loads."""
    keys = dict(keys)
    for fmt in registry.FORMATS:
        keys = fmt.rename(file, keys)
    declared = _declared_formats(file, keys)
    for key in [k for k in keys if k.endswith(".comfy_quant")]:
        del keys[key]
    allowed = [f for f in registry.FORMATS if weight_only or not f.weight_only]
    marked = {}
    for layer, conf in declared.items():
        scale = keys.get(f"{layer}.weight_scale")
        fmt = registry.declared(conf, None if scale is None else file.tensors[scale].shape, allowed)
        if fmt is not None:
            marked[layer] = fmt
    by_dtype = {fmt.dtype: fmt for fmt in reversed(allowed) if fmt.by_dtype}
    refused = {layer: _described(conf) for layer, conf in declared.items() if layer not in marked}
    formats = {layer: fmt for layer, fmt in marked.items() if not fmt.by_dtype}  # planned as declared
    for key, file_key in keys.items():
        if not key.endswith(".weight"):
            continue
        module, dtype = key[: -len(".weight")], file.tensors[file_key].dtype
        if module in formats:
            if dtype != formats[module].dtype:
                refused[module] = f"{formats[module].name} marked but stored as {dtype}"
        elif dtype in by_dtype:
            formats[module] = by_dtype[dtype]
        elif dtype in _QUANTISED_DTYPES:
            refused.setdefault(module, _QUANTISED_DTYPES[dtype])
    if refused:
        layer, fmt = sorted(refused.items())[0]
        raise UnsupportedQuantizationError(
            f"{file.path}: {len(refused)} layers are quantised as {fmt} (e.g. {layer}); this package loads "
            f"{registry.supported()}. Use the official bf16 or fp8 checkpoint of this model")
    scales = tuple({f".{s}" for f in registry.FORMATS for s in f.scales})
    orphans = sorted(k for k in keys if k.endswith(scales) and k.rsplit(".", 1)[0] not in formats)
    if orphans:
        raise UnsupportedQuantizationError(f"{file.path}: {orphans[0]} scales a weight that is in no format this "
                                           f"package loads; it loads {registry.supported()}")
    layers = {m: StoredLayer(f, frozenset(s for s in f.scales if f"{m}.{s}" in keys),
                             bool(declared.get(m, {}).get("full_precision_matrix_mult", False)))
              for m, f in formats.items()}
    return StoredFormats(layers, keys)


def _described(conf: Mapping) -> str:
    """A declared format as the refusal names it, e.g. "int8_tensorwise (convrot)"."""
    extra = [key for key in ("convrot",) if conf.get(key)]
    return str(conf.get("format")) + (f" ({', '.join(extra)})" if extra else "")


def _declared_formats(file: SafetensorsFile, keys: Mapping[str, str]) -> dict[str, dict]:
    """Layer -> its `comfy_quant` entry ({"format": ..., ...}), from the `comfy_quant` tensors (read here: a few
    bytes each) and the header's metadata."""
    formats = {}
    header = file.metadata.get("_quantization_metadata")
    if header:
        try:
            layers = json.loads(header).get("layers", {})
            formats |= {name.removeprefix("model.diffusion_model."): _entry(entry) for name, entry in
                        layers.items()}
        except (ValueError, AttributeError) as exc:
            raise UnsupportedQuantizationError(f"{file.path}: unreadable _quantization_metadata ({exc})")
    marked = {k: fk for k, fk in keys.items() if k.endswith(".comfy_quant")}
    for key, tensor in read_tensors(file, marked).items():
        try:
            formats[key[: -len(".comfy_quant")]] = _entry(json.loads(tensor.numpy().tobytes()))
        except (ValueError, AttributeError) as exc:
            raise UnsupportedQuantizationError(f"{file.path}: {marked[key]} is not the JSON ComfyUI writes ({exc})")
    return formats


def _entry(entry: object) -> dict:
    if not isinstance(entry, dict):
        raise AttributeError(f"a layer entry is {type(entry).__name__}, not a JSON object")  # noqa: TRY004 (caught)
    return entry


def install_layers(model: nn.Module, stored: StoredFormats, path: object, *, matmul: bool | None = None
                   ) -> dict[str, tuple[int, ...]]:
    """On the meta model: each quantised linear of `stored` becomes its format's layer (`matmul` as
    `WeightFormat.layer`'s; None and a layer marked `full_precision_matrix_mult`: dequantised per call, as ComfyUI
    runs it); returns the state-dict shapes the file must match (without the scales it may omit)."""
    modules = dict(model.named_modules())
    for name, layer in stored.layers.items():
        if type(modules.get(name)) is not nn.Linear:
            raise UnsupportedQuantizationError(
                f"{path}: {name}.weight is {layer.format.name} but {name} is not a linear layer of the model; the "
                f"file is not a supported {layer.format.label} file")
        own = False if matmul is None and layer.full_precision else matmul
        replace_module(model, name, layer.format.layer(modules[name], layer.present, own))
    omitted = set(default_scales(stored, "meta"))
    return {name: tuple(t.shape) for name, t in model.state_dict().items() if name not in omitted}


def default_scales(stored: StoredFormats, device: torch.device | str) -> dict[str, torch.Tensor]:
    """The scales the file leaves out and the formats fill in (fp8 stored without a scale, a plain cast: 1)."""
    return {f"{name}.{suffix}": torch.full((), value, device=device) for name, layer in stored.layers.items()
            for suffix, value in layer.format.defaults(layer.present).items()}
