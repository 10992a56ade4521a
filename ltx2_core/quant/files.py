"""Which transformer tensors of a checkpoint are fp8, in the layouts LTX-2 files come in; read from the header (and
ComfyUI's small `comfy_quant` tensors) before any weight:

* official (`ltx-2-19b-dev-fp8`, `ltx-2.3-22b-dev-fp8`): `<layer>.weight` float8_e4m3fn, `<layer>.weight_scale` (0-d
  fp32, w = q · scale) and `<layer>.input_scale` (0-d fp32); everything else bf16;
* ComfyUI (fp8_scaled): the same, marked per layer by `<layer>.comfy_quant`, a uint8 tensor holding JSON such as
  {"format": "float8_e4m3fn"} (or by the header's `_quantization_metadata`), or the older `scaled_fp8` marker key with
  `<layer>.scale_weight` / `<layer>.scale_input`;
* fp8 weights without a scale (a plain cast): scale 1.

Other formats (nvfp4, mxfp8, float8_e5m2, int8) are refused naming the ones that load; GGUF files are not
safetensors and are refused by the header check.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import NamedTuple

import torch
from torch import nn

from ltx2_core.errors import UnsupportedQuantizationError
from ltx2_core.loader.safetensors_file import SafetensorsFile, read_tensors
from ltx2_core.quant.fp8 import FP8Linear, replace_module
from ltx2_core.quant.nvfp4 import NVFP4Linear

FP8_FORMAT, NVFP4_FORMAT = "float8_e4m3fn", "nvfp4"
SUPPORTED = ("bf16/fp16/fp32 checkpoints and float8_e4m3fn with per-tensor scales (the official *-fp8 files, "
             "ComfyUI's fp8_scaled), and for text encoders also ComfyUI's nvfp4 (fp4_mixed)")
_LEGACY = {".scale_weight": ".weight_scale", ".scale_input": ".input_scale"}
_QUANTISED_DTYPES = {"F8_E5M2": "float8_e5m2", "I8": "int8", "U8": "packed 4-bit (nvfp4/mxfp4)"}


class Fp8Plan(NamedTuple):
    """layers: fp8 module name -> whether the file has its input_scale; unscaled: fp8 modules without a weight
    scale (scale 1); keys: model key -> file key with the bookkeeping keys dropped and legacy scale names mapped;
    nvfp4: NVFP4 module name -> whether it has an input_scale (text encoders only, see `model.nvfp4`)."""

    layers: dict[str, bool]
    unscaled: frozenset[str]
    keys: dict[str, str]
    nvfp4: dict[str, bool] = {}

    @property
    def kept(self) -> set[str]:
        """The model keys read as they are stored (quantised weights and their scales), never cast."""
        suffixes = ("weight", "weight_scale", "weight_scale_2", "input_scale")
        return {f"{m}.{suffix}" for m in (*self.layers, *self.nvfp4) for suffix in suffixes}


def is_fp8_checkpoint(path) -> bool:
    """Whether a checkpoint stores any weight in float8_e4m3fn (header only)."""
    from ltx2_core.loader.safetensors_file import read_header

    return any(entry.dtype == "F8_E4M3" for entry in read_header(path).tensors.values())


def fp8_plan(file: SafetensorsFile, keys: Mapping[str, str], allow_nvfp4: bool = False) -> Fp8Plan:
    """The plan of a file's quantised layers; `allow_nvfp4` accepts ComfyUI's NVFP4 layers (weight-only, for the
    fp4-mixed text encoders); every other format is refused naming what loads."""
    keys = dict(keys)
    if keys.pop("scaled_fp8", None) is not None:
        for key in list(keys):
            for old, new in _LEGACY.items():
                if key.endswith(old):
                    keys[key[: -len(old)] + new] = keys.pop(key)
    formats = _declared_formats(file, keys)
    for key in [k for k in keys if k.endswith(".comfy_quant")]:
        del keys[key]
    nvfp4 = {layer: f"{layer}.input_scale" in keys for layer, fmt in formats.items()
             if fmt == NVFP4_FORMAT and allow_nvfp4}
    refused = {layer: fmt for layer, fmt in formats.items() if fmt != FP8_FORMAT and layer not in nvfp4}
    layers, unscaled = {}, set()
    for key, file_key in keys.items():
        if not key.endswith(".weight"):
            continue
        module, dtype = key[: -len(".weight")], file.tensors[file_key].dtype
        if module in nvfp4:
            if dtype != "U8":
                refused[module] = f"nvfp4 marked but stored as {dtype}"
        elif dtype == "F8_E4M3":
            layers[module] = f"{module}.input_scale" in keys
            if f"{module}.weight_scale" not in keys:
                unscaled.add(module)
        elif dtype in _QUANTISED_DTYPES:
            refused.setdefault(module, _QUANTISED_DTYPES[dtype])
    if refused:
        layer, fmt = sorted(refused.items())[0]
        raise UnsupportedQuantizationError(
            f"{file.path}: {len(refused)} layers are quantised as {fmt} (e.g. {layer}); this package loads "
            f"{SUPPORTED}. Use the official bf16 or fp8 checkpoint of this model")
    orphans = sorted(k for k in keys if k.endswith((".weight_scale", ".input_scale", ".weight_scale_2"))
                     and k.rsplit(".", 1)[0] not in layers and k.rsplit(".", 1)[0] not in nvfp4)
    if orphans:
        raise UnsupportedQuantizationError(f"{file.path}: {orphans[0]} scales a weight that is not float8_e4m3fn; "
                                           f"this package loads {SUPPORTED}")
    return Fp8Plan(layers, frozenset(unscaled), keys, nvfp4)


def _declared_formats(file: SafetensorsFile, keys: Mapping[str, str]) -> dict[str, str]:
    """Layer -> format, from the `comfy_quant` tensors (read here: a few bytes each) and the header's metadata."""
    formats = {}
    header = file.metadata.get("_quantization_metadata")
    if header:
        try:
            layers = json.loads(header).get("layers", {})
            formats |= {name.removeprefix("model.diffusion_model."): str(entry.get("format")) for name, entry in
                        layers.items()}
        except (ValueError, AttributeError) as exc:
            raise UnsupportedQuantizationError(f"{file.path}: unreadable _quantization_metadata ({exc})")
    marked = {k: fk for k, fk in keys.items() if k.endswith(".comfy_quant")}
    for key, tensor in read_tensors(file, marked).items():
        try:
            formats[key[: -len(".comfy_quant")]] = str(json.loads(tensor.numpy().tobytes()).get("format"))
        except (ValueError, AttributeError) as exc:
            raise UnsupportedQuantizationError(f"{file.path}: {marked[key]} is not the JSON ComfyUI writes ({exc})")
    return formats


def apply_fp8_plan(model: nn.Module, plan: Fp8Plan, path: object, *, scaled_mm: bool | None = None) -> dict:
    """On the meta model: each fp8 layer of `plan` becomes an FP8Linear (`scaled_mm` as FP8Linear's); returns the
    state-dict shapes the file must match (no weight_scale for the unscaled layers)."""
    modules = dict(model.named_modules())
    for name, has_input_scale in plan.nvfp4.items():
        if type(modules.get(name)) is not nn.Linear:
            raise UnsupportedQuantizationError(f"{path}: {name} is marked nvfp4 but is not a linear layer of the "
                                               "model; the file is not a supported fp4-mixed file")
        replace_module(model, name, NVFP4Linear.like(modules[name], has_input_scale))
    for name, has_input_scale in plan.layers.items():
        linear = modules.get(name)
        if type(linear) is not nn.Linear:
            raise UnsupportedQuantizationError(f"{path}: {name}.weight is float8_e4m3fn but {name} is not a linear "
                                               "layer of the model; the file is not a supported fp8 file")
        fp8 = FP8Linear.like(linear, has_input_scale)
        fp8.scaled_mm = scaled_mm
        replace_module(model, name, fp8)
    return {name: tuple(t.shape) for name, t in model.state_dict().items()
            if not (name.endswith(".weight_scale") and name.rsplit(".", 1)[0] in plan.unscaled)}


def unscaled_state(plan: Fp8Plan, device: torch.device | str) -> dict[str, torch.Tensor]:
    """The scale 1 of every fp8 layer stored without one (a plain cast)."""
    return {f"{name}.weight_scale": torch.ones((), device=device) for name in plan.unscaled}
