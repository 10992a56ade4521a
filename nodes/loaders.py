"""Loader nodes: the checkpoint (transformer + VAEs + vocoder), the Gemma 3 text encoder, LoRAs, the upsampler."""

from __future__ import annotations

import torch

from ltx2_core import (
    load_audio_decoder,
    load_lora,
    load_prompt_encoder,
    load_transformer,
    load_upsampler,
    load_video_decoder,
    load_video_encoder,
    load_vocoder,
)
from ltx2_core.types import Decoders

from . import bridge
from .handles import MODEL, TEXT_ENCODER, UPSAMPLER, ModelHandle

CATEGORY = "LTX-2/loaders"
DTYPES = {"auto": None, "bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DEVICES = ("default", "cpu", "cuda")


def _device(choice: str) -> torch.device:
    if choice == "default":
        return bridge.torch_device()
    if choice == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was chosen but no CUDA GPU is visible; choose 'default' or 'cpu'")
    return torch.device(choice)


def _options(folder: str) -> list[str]:
    return bridge.file_options(folder)


class LTX2CheckpointLoader:
    DESCRIPTION = "Loads an official LTX-2 / LTX-2.3 checkpoint: the transformer and the VAEs and vocoder it bundles."
    CATEGORY = CATEGORY
    RETURN_TYPES = (MODEL,)
    RETURN_NAMES = ("model",)
    FUNCTION = "load"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "ckpt_name": (_options("checkpoints"), {"tooltip": "ltx-2-19b-*.safetensors or ltx-2.3-22b-*.safetensors "
                                                    "from models/checkpoints"}),
            "weight_dtype": (list(DTYPES), {"default": "auto", "tooltip": "auto keeps the file's dtype (bf16); fp32 "
                                            "doubles the memory"}),
            "device": (list(DEVICES), {"default": "default", "tooltip": "where the model runs; default is "
                                       "ComfyUI's device"}),
        }}

    def load(self, ckpt_name: str, weight_dtype: str = "auto", device: str = "default"):
        path, target, dtype = bridge.model_path("checkpoints", ckpt_name), _device(device), DTYPES[weight_dtype]
        bridge.free_memory()
        load = dict(device=target, dtype=dtype)
        decoders = Decoders(load_video_decoder(path, **load), load_audio_decoder(path, **load),
                            load_vocoder(path, device=target))  # fp32: small and precision-bound
        return (ModelHandle(load_transformer(path, **load), decoders, load_video_encoder(path, **load), path),)


class LTX2TextEncoderLoader:
    DESCRIPTION = ("Loads Gemma 3 12B (ComfyUI's single file or a Hugging Face folder) with the checkpoint's text "
                   "projection and connectors.")
    CATEGORY = CATEGORY
    RETURN_TYPES = (TEXT_ENCODER,)
    RETURN_NAMES = ("text_encoder",)
    FUNCTION = "load"

    @classmethod
    def INPUT_TYPES(cls):
        options = _options("text_encoders") + bridge.model_folders_with("text_encoders", "config.json")
        return {"required": {
            "text_encoder": (options, {"tooltip": "gemma_3_12B_it*.safetensors or a google/gemma-3-12b-it folder "
                                       "in models/text_encoders"}),
            "model": (MODEL, {"tooltip": "the LTX-2 model whose text projection and connectors encode the prompt"}),
            "device": (list(DEVICES), {"default": "default", "tooltip": "where Gemma runs"}),
            "offload": ("BOOLEAN", {"default": True, "tooltip": "keep Gemma on the CPU between prompts (it visits "
                                    "the device only while encoding)"}),
        }}

    def load(self, text_encoder: str, model: ModelHandle, device: str = "default", offload: bool = True):
        path, target = bridge.model_path("text_encoders", text_encoder), _device(device)
        dtype = next(model.transformer.parameters()).dtype
        offload_device = "cpu" if offload and target.type != "cpu" else None
        return (load_prompt_encoder(path, model.checkpoint, device=target, dtype=dtype,
                                    offload_device=offload_device),)


class LTX2LoraLoader:
    DESCRIPTION = "Adds a LoRA (fused while sampling, restored after: the upstream model is never changed). Chainable."
    CATEGORY = CATEGORY
    RETURN_TYPES = (MODEL,)
    RETURN_NAMES = ("model",)
    FUNCTION = "load"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "model": (MODEL, {"tooltip": "the model to add the LoRA to"}),
            "lora_name": (_options("loras"), {"tooltip": "a LoRA for LTX-2 from models/loras"}),
            "strength": ("FLOAT", {"default": 1.0, "min": -10.0, "max": 10.0, "step": 0.01,
                                   "tooltip": "how strongly the LoRA applies; 0 disables it"}),
        }}

    def load(self, model: ModelHandle, lora_name: str, strength: float = 1.0):
        lora = load_lora(bridge.model_path("loras", lora_name))
        return (model._replace(loras=model.loras + ((lora, float(strength)),)),)


class LTX2UpsamplerLoader:
    DESCRIPTION = "Loads the x2 spatial latent upsampler of the two-stage pipelines."
    CATEGORY = CATEGORY
    RETURN_TYPES = (UPSAMPLER,)
    RETURN_NAMES = ("upsampler",)
    FUNCTION = "load"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "upscale_model_name": (_options("latent_upscale_models"), {
                "tooltip": "ltx-2-spatial-upscaler-x2-*.safetensors (2.0) or ltx-2.3-spatial-upscaler-x2-* (2.3) "
                           "from models/latent_upscale_models"}),
            "model": (MODEL, {"tooltip": "the model it upsamples for (its device and dtype)"}),
        }}

    def load(self, upscale_model_name: str, model: ModelHandle):
        param = next(model.transformer.parameters())
        path = bridge.model_path("latent_upscale_models", upscale_model_name)
        return (load_upsampler(path, device=param.device, dtype=param.dtype),)
