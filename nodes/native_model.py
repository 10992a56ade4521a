"""ComfyUI's native LTX-2 MODEL in our sampler, on the same weights.

ComfyUI 0.26.0's `LTXAVModel` (comfy/ldm/lightricks/av_model.py) names its parameters as the checkpoint does, and
so do we: every tensor of our transformer and connectors has a twin at the same path in it. `adopt` builds ours
around those twins without a copy:
* each `nn.Linear` of ours becomes ComfyUI's module at that path (99.9 % of the bytes): its own layer op runs, so
  what ComfyUI does per layer keeps working: LoRA patches it applies per call (low-VRAM loads), weights it casts
  from a stored dtype (fp8 scaled, `manual_cast`), quantised formats whose module computes its own matmul
  (comfy_kitchen's, ComfyUI-GGUF's), weights it streams in;
* every other parameter (norm weights, modulation tables: a few MB) is ComfyUI's tensor itself where it is on the
  compute device in the compute dtype (a fully loaded model: LoRA patches applied in place are seen), else a copy
  made there for the run.
Nothing here imports ComfyUI (the loading call is `bridge.load_native_model`); the model objects are duck-typed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from ltx2_core import TransformerConfig
from ltx2_core.errors import ConfigError
from ltx2_core.hosts import LocalHost
from ltx2_core.model.text.config import TextConfig
from ltx2_core.model.text.connector import EmbeddingsConnector
from ltx2_core.model.transformer import LTX2Transformer

NATIVE_SAMPLER = "ComfyUI's own SamplerCustomAdvanced"
CONNECTORS = ("video_embeddings_connector", "audio_embeddings_connector")


def _is_linear(module: nn.Module) -> bool:
    """ComfyUI's Linear subclasses nn.Linear; a quantised pack's layer may only look like one."""
    return isinstance(module, nn.Linear) or (hasattr(module, "in_features") and hasattr(module, "out_features"))


def adopt(ours: nn.Module, theirs: nn.Module, device: torch.device, dtype: torch.dtype) -> nn.Module:
    """`ours` (built on `meta`) made of `theirs`' modules and tensors (module docstring); ValueError naming what
    differs when a path or a shape has no twin (not an LTX-2 model of this structure)."""
    modules = dict(theirs.named_modules())
    for name, module in list(ours.named_modules()):
        if not isinstance(module, nn.Linear):
            continue
        native = modules.get(name)
        if native is None or not _is_linear(native):
            raise ValueError(f"the native model has no linear layer {name!r}; it is not an LTX-2 model our sampler "
                             f"can run: use {NATIVE_SAMPLER}")
        if (native.in_features, native.out_features) != (module.in_features, module.out_features):
            raise ValueError(f"the native model's {name} is {native.in_features} -> {native.out_features}, ours "
                             f"{module.in_features} -> {module.out_features}: its config differs from its weights; use "
                             f"{NATIVE_SAMPLER}")
        if (getattr(native, "bias", None) is None) != (module.bias is None):
            has = "has" if module.bias is None else "lacks"
            raise ValueError(f"the native model's {name} {has} a bias, unlike the checkpoint's config (ComfyUI "
                             "0.26.0 builds LTX-2.5's feed-forwards with biases the release does not have, and "
                             "leaves them unset): load the file with LTX-2 Model Loader / Checkpoint Loader and "
                             "sample with LTX-2 Sampler")
        ours.set_submodule(name, native)
    tensors = dict(theirs.named_parameters()) | dict(theirs.named_buffers())
    for name, own in [*ours.named_parameters(), *ours.named_buffers()]:
        if not own.is_meta:
            continue  # a native layer's, adopted with it
        native = tensors.get(name)
        if native is None or native.shape != own.shape:
            found = "none" if native is None else tuple(native.shape)
            raise ValueError(f"the native model's {name} is {found}, ours {tuple(own.shape)}; use {NATIVE_SAMPLER}")
        owner, _, leaf = name.rpartition(".")
        module = ours.get_submodule(owner)
        value = native if native.device == device and native.dtype == dtype else native.detach().to(device, dtype)
        if leaf in module._parameters:
            module._parameters[leaf] = value if isinstance(value, nn.Parameter) else nn.Parameter(value, False)
        else:
            module._buffers[leaf] = value
    return ours.eval()


def native_configs(unet_config: Mapping[str, Any]) -> tuple[TransformerConfig, TextConfig]:
    """Our configs from ComfyUI's `model_config.unet_config`, which holds the checkpoint's `transformer` metadata
    section (model_detection merges it in) beside ComfyUI's own keys."""
    if unet_config.get("image_model") != "ltxav":
        raise ValueError(f"the MODEL is a {unet_config.get('image_model') or 'non-LTX'} model, not LTX-2's audio + "
                         "video model: load an LTX-2 checkpoint (Load Checkpoint / Load Diffusion Model)")
    section = {k: v for k, v in unet_config.items() if k != "image_model"}
    try:
        return TransformerConfig.from_metadata(section), TextConfig.from_metadata(section)
    except ConfigError as exc:
        raise ValueError(f"the native model's config: {exc}; use {NATIVE_SAMPLER}") from exc


def native_transformer(diffusion_model: nn.Module, config: TransformerConfig, device: torch.device,
                       dtype: torch.dtype) -> LTX2Transformer:
    with torch.device("meta"):
        ours = LTX2Transformer(config)
    return adopt(ours, diffusion_model, device, dtype)


def native_host(diffusion_model: nn.Module, config: TransformerConfig, device: torch.device,
                dtype: torch.dtype) -> LocalHost:
    """Where our sampler runs a native model: here, on ComfyUI's device (the native loader's counterpart of the
    checkpoint loader's host; a native MODEL has no multi-device layout)."""
    return LocalHost(native_transformer(diffusion_model, config, device, dtype), device, dtype)


def native_connectors(diffusion_model: nn.Module, config: TextConfig, device: torch.device,
                      dtype: torch.dtype) -> tuple[EmbeddingsConnector, EmbeddingsConnector]:
    """The model's video and audio text connectors (2.3 and 2.5 keep them in the DiT file; ComfyUI's LTXAVModel
    runs them on `unprocessed_ltxav_embeds` conditioning)."""
    found = []
    for name, stream in zip(CONNECTORS, (config.video, config.audio)):
        if not hasattr(diffusion_model, name):
            raise ValueError(f"the native model has no {name}: its conditioning must be our encoded prompts (LTX-2 "
                             "Text Encode's native outputs), not features to connect")
        with torch.device("meta"):
            ours = EmbeddingsConnector(stream)
        found.append(adopt(ours, getattr(diffusion_model, name), device, dtype))
    return found[0], found[1]
