"""Loader nodes: the model (an LTX-2.0/2.3 checkpoint bundling transformer, VAEs and vocoder, or LTX-2.5's separate
files), the Gemma text encoder, LoRAs, the upsampler."""

from __future__ import annotations

import os

import torch

from ltx2_core import load_lora, load_prompt_encoder, load_upsampler
from ltx2_core.hosts import LocalHost, WorkerHost
from ltx2_core.memory.offload import load_streamed_prompt_encoder, offload
from ltx2_core.model.transformer.attention_select import MODES as ATTENTION_MODES
from ltx2_core.model.transformer.attention_select import check_attention, device_table
from ltx2_core.model_files import ModelFiles
from ltx2_core.quant.fp8_matmul import CHOICES as FP8_MATMUL_CHOICES, resolve as resolve_fp8_matmul
from ltx2_core.quant.policy import FP8_MODES
from ltx2_core.memory.plan import MemoryPlanError
from ltx2_core.runtime import Controller
from ltx2_core.runtime.text_task import LoadEncoder, WorkerPromptEncoder

from . import bridge
from .handles import MODEL, PARALLEL, TEXT_ENCODER, UPSAMPLER, ModelHandle, Parallel
from .validation import file_problem, link_problem, stated_limits

CATEGORY = "LTX-2/loaders"
DTYPES = {"auto": None, "bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DEVICES = ("default", "cpu", "cuda")
MEMORY_MODES = ("auto", "resident", "stream")
NONE = "none"  # an optional file input left empty
ATTENTION = (list(ATTENTION_MODES), {"default": "auto", "tooltip": "the transformer's attention: auto, the fastest "
             "exact backend of the device; or one by name (PyTorch SDPA's sdpa, math, flash, cudnn, efficient; flash4 "
             "needs flash-attn-4 on H100/H200/B200); sage and kitchen_int8 are 8-bit: faster, approximate "
             "(docs/attention.md)"})
PLANNED_FOR = (121, 512, 768, 4)  # frames, height, width, guidance passes of the request a load plans for
_LOADED: dict[str, ModelHandle] = {}  # the model each checkpoint-loader node (by its id) holds now
_TEXT_LOADED: dict[str, WorkerPromptEncoder] = {}  # the encoder each text-encoder loader (by its id) has on workers
_RELEASED = 0  # how many times ComfyUI's unload released them: a loader whose handle went loads again


def release_all() -> None:
    """ComfyUI unloads all models: the pack's go too (weights freed, workers stopped), and every checkpoint loader
    runs again with the next prompt (IS_CHANGED), since the handle ComfyUI cached for it is released."""
    global _RELEASED
    if _LOADED:
        _RELEASED += 1
    while _TEXT_LOADED:
        _TEXT_LOADED.popitem()[1].release()
    while _LOADED:
        _LOADED.popitem()[1].release()


bridge.on_unload_all_models(release_all)


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
        }, "optional": {
            "fp8": (list(FP8_MODES), {"default": "auto", "tooltip": "auto: an fp8 file stays fp8 (half the weight "
                                      "memory; fp8 tensor cores on RTX 40/50, H100 and newer), a bf16 file as "
                                      "weight_dtype; quantize: a bf16 file's block weights to fp8 at load; "
                                      "dequantize: an fp8 file to weight_dtype"}),
            "memory": (list(MEMORY_MODES), {"default": "auto", "tooltip": "auto: on a GPU, plan from its free "
                       "memory (for 768x512x121 with 4 guidance passes) which transformer blocks stay on it and "
                       "stream the others from RAM (pinned when it fits); resident: all on the device; stream: every "
                       "block streamed (the least device memory)"}),
            "parallel": (PARALLEL, {"tooltip": "from LTX2 Parallel Config: the transformer spread over several "
                                    "devices, one worker process each (the VAEs stay on `device`; the video's tiles "
                                    "are decoded across the workers, each loading the video decoder once)"}),
            "fp8_matmul": (list(FP8_MATMUL_CHOICES), {"default": "auto", "tooltip": "how fp8 weights multiply: "
                           "auto (fp8 tensor cores with a fused quantiser on RTX 40/50, H100 and newer, else "
                           "dequantize); tensor / tensor-fused / kitchen scale the activations per tensor, row / "
                           "row-fused per token; dequantize: bf16 matmuls"}),
            "attention": ATTENTION,
        }, "hidden": {"unique_id": "UNIQUE_ID"}}

    @classmethod
    def VALIDATE_INPUTS(cls, ckpt_name: str | None = None, input_types: dict | None = None):
        """The file's kind (headers only); input_types tells a null file name from a linked one (and ComfyUI then
        leaves the links' types to `link_problem`)."""
        links = input_types  # None: called without ComfyUI, a None value then counts as linked
        return link_problem(cls, links) or file_problem("checkpoint", ckpt_name, links) or True

    @classmethod
    def IS_CHANGED(cls, **inputs):
        return _RELEASED

    def load(self, ckpt_name: str, weight_dtype: str = "auto", device: str = "default", fp8: str = "auto",
             memory: str = "auto", parallel: Parallel | None = None, unique_id: str | None = None,
             fp8_matmul: str = "auto", attention: str = "auto"):
        files = ModelFiles(checkpoint=bridge.model_path("checkpoints", ckpt_name), fp8=fp8, fp8_matmul=fp8_matmul)
        return (_load_model(files, weight_dtype, device, memory, parallel, unique_id, {"checkpoint": "ckpt_name"},
                            attention),)


class LTX2ModelLoader(LTX2CheckpointLoader):
    DESCRIPTION = ("Loads an LTX-2 model from its separate files, as ComfyUI keeps them: the transformer (LTX-2.5's, "
                   "or a GGUF of LTX-2 / 2.3 / 2.5) from models/diffusion_models or models/unet, the video VAE and the "
                   "audio VAE (with its vocoder) from models/vae, and for a GGUF the text projection file it needs "
                   "from models/text_encoders.")

    @classmethod
    def INPUT_TYPES(cls):
        inputs = super().INPUT_TYPES()
        vae = _options("vae")
        files = {
            "transformer": (_options("diffusion_models") + bridge.gguf_options(), {"tooltip": "ltx-2.5-22b-dev-"
                            "transformer-*.safetensors (or -distilled-) from models/diffusion_models, or a transformer "
                            "GGUF of LTX-2 / 2.3 / 2.5 (ComfyUI-GGUF's conversions, models/diffusion_models or unet)"}),
            "video_vae": (vae, {"tooltip": "from models/vae: ltx-2.5-video-vae-bf16 (the diffusion decoder, the "
                          "release's quality) or ltx-2.5-video-vae-conv-bf16 (the convolutional decoder: faster, less "
                          "memory)"}),
            "audio_vae": (vae, {"tooltip": "ltx-2.5-audio-vae-*.safetensors (audio VAE and vocoder) from models/vae"}),
        }
        required = {name: spec for name, spec in inputs["required"].items() if name != "ckpt_name"}
        optional = {name: spec for name, spec in inputs["optional"].items() if name not in ("fp8_matmul", "attention")}
        projection = {"text_projection": ([NONE] + _options("text_encoders"), {"default": NONE, "tooltip": "LTX-2 / "
                      "2.3 with a GGUF transformer: the text projection and connectors, e.g. ComfyUI's ltx-2*-"
                      "embeddings_connector*.safetensors from models/text_encoders (LTX-2.5: only when the GGUF "
                      "lacks the connectors)"})}
        # after text_projection, in the order they came: saved workflows keep their widget values in order
        last = {name: inputs["optional"][name] for name in ("fp8_matmul", "attention")}
        return {**inputs, "required": files | required, "optional": optional | projection | last}

    @classmethod
    def VALIDATE_INPUTS(cls, transformer: str | None = None):
        # ComfyUI reports a failure here on every input this names, so it names the transformer alone; the VAE and
        # text projection files keep ComfyUI's list check and are checked by kind when the node runs
        # (`ModelFiles.check_model`, headers only, before any model work, naming the input)
        return file_problem("transformer", transformer) or True

    def load(self, transformer: str, video_vae: str, audio_vae: str, weight_dtype: str = "auto",
             device: str = "default", fp8: str = "auto", memory: str = "auto", parallel: Parallel | None = None,
             unique_id: str | None = None, text_projection: str = NONE, fp8_matmul: str = "auto",
             attention: str = "auto"):
        files = ModelFiles(checkpoint=bridge.model_path("diffusion_models", transformer),
                           vae=bridge.model_path("vae", video_vae), audio_vae=bridge.model_path("vae", audio_vae),
                           fp8=fp8, text_projection=None if text_projection in (NONE, None) else
                           bridge.model_path("text_encoders", text_projection), fp8_matmul=fp8_matmul)
        labels = {"checkpoint": "transformer", "vae": "video_vae", "audio_vae": "audio_vae",
                  "text_projection": "text_projection"}
        return (_load_model(files, weight_dtype, device, memory, parallel, unique_id, labels, attention),)


def _load_model(files: ModelFiles, weight_dtype: str, device: str, memory: str, parallel: Parallel | None,
                unique_id: str | None, labels: dict[str, str], attention: str = "auto") -> ModelHandle:
    """The model handle of `files`: its files checked together first (kinds, one release; named by the node's
    `labels` of their inputs), the node's previous model released, then the transformer on workers (a
    multi-device `parallel` layout) or here under a memory plan, and the decoders and the video and audio encoders
    here. A named `attention` backend is checked against the device before anything loads."""
    target, dtype = _device(device), DTYPES[weight_dtype]
    files = files.with_duration_head()  # LTX-2.5's duration head file beside the transformer, when there is one
    files.check_model(labels)
    resolve_fp8_matmul(files.fp8_matmul, target)  # a recipe the device cannot run: refused before any weight moves
    config = files.transformer_config()
    check_attention(attention, device_table(target), dtype, (config.video.head_dim, config.audio.head_dim))
    previous = _LOADED.pop(unique_id, None)
    if previous is not None:  # this node loads another model: the old one goes first, never two at once
        previous.release()
    bridge.free_memory()
    if parallel is not None and (parallel.layout.world_size > 1 or parallel.attach):
        models = files.load_checkpoint(target, dtype, transformer=False)
        host = WorkerHost(_start_workers(files, parallel, target, dtype), attention)
    else:
        frames, height, width, passes = PLANNED_FOR
        plan = files.plan(target, frames=frames, height=height, width=width, passes=passes, dtype=dtype,
                          memory=memory)
        models = files.load_checkpoint(target, dtype, plan)
        if plan is not None:
            print(f"[LTX-2] {plan.describe()}")
        host = LocalHost(models.transformer, target, next(models.decoders.video.parameters()).dtype, plan, attention)
    handle = ModelHandle(host, models.decoders, models.video_encoder, files, audio_encoder=models.audio_encoder,
                         duration_head=models.duration_head)
    if unique_id is not None:
        _LOADED[unique_id] = handle
    return handle


def _start_workers(files: ModelFiles, parallel: Parallel, device: torch.device, dtype: torch.dtype | None
                   ) -> Controller:
    """One worker per device, each with its shard: spawned here (CUDA devices 0..N-1, or CPU processes sharing the
    cores), or torchrun's attaching to `parallel.attach` (the device type is `device`'s)."""
    layout = parallel.layout
    threads = None if device.type == "cuda" or parallel.attach else max(1, (os.cpu_count() or 1) // layout.world_size)
    workers = Controller(files, layout, device_type=device.type, dtype=dtype, threads=threads, attach=parallel.attach)
    with bridge.interrupts():
        workers.start(bridge.interrupt_requested)
    return workers



class LTX2TextEncoderLoader:
    DESCRIPTION = ("Loads Gemma 3 12B (ComfyUI's single file or a Hugging Face folder) with the checkpoint's text "
                   "projection and connectors. Given a model on several workers (LTX2 Parallel Config), Gemma loads "
                   "on those workers instead, spread as their memory allows (device unused; with offload each worker "
                   "keeps its part in RAM and moves it to its GPU while encoding).")
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
            "offload": ("BOOLEAN", {"default": True, "tooltip": "keep Gemma's layers in RAM and stream them to the "
                                    "device one at a time while encoding (about 3 GB on the device instead of 24)"}),
        }, "hidden": {"unique_id": "UNIQUE_ID"}}

    @classmethod
    def VALIDATE_INPUTS(cls, text_encoder: str | None = None, input_types: dict | None = None):
        links = input_types  # None: called without ComfyUI, a None value then counts as linked
        return link_problem(cls, links) or file_problem("text encoder", text_encoder, links) or True

    def load(self, text_encoder: str, model: ModelHandle, device: str = "default", offload: bool = True,
             unique_id: str | None = None):
        path, target = bridge.model_path("text_encoders", text_encoder, marker="config.json"), _device(device)
        dtype = model.check_loaded().weights.dtype
        if (previous := _TEXT_LOADED.pop(unique_id, None)) is not None:  # this node's encoder on workers goes first
            previous.release()
        try:  # Gemma on the model's workers, spread (None: loaded here)
            encoder = model.host.prompt_encoder(LoadEncoder(path, model.text_sources(path), dtype,
                                                            resident=not offload), check=model.check_loaded)
        except MemoryPlanError as refused:
            encoder = None
            print(f"[LTX-2] the text encoder fits none of the workers' layouts ({refused}); it is loaded here "
                  "instead, as device and offload say")
        if encoder is not None:
            print(f"[LTX-2] {encoder.describe()}")
            if unique_id is not None:
                _TEXT_LOADED[unique_id] = encoder
            return (encoder,)
        if offload and target.type != "cpu":
            return (load_streamed_prompt_encoder(path, model.text_sources(path), device=target, dtype=dtype,
                                                 pin=model.memory is None or model.memory.pin),)
        return (load_prompt_encoder(path, model.text_sources(path), device=target, dtype=dtype),)


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

    @classmethod
    def VALIDATE_INPUTS(cls, lora_name: str | None = None, strength: float | None = None,
                        input_types: dict | None = None):
        links = input_types  # None: called without ComfyUI, a None value then counts as linked
        return (link_problem(cls, links) or stated_limits(cls, "strength", strength, links)
                or file_problem("LoRA", lora_name, links) or True)

    def load(self, model: ModelHandle, lora_name: str, strength: float = 1.0):
        lora = load_lora(bridge.model_path("loras", lora_name))
        return (model._replace(loras=model.loras + ((lora, float(strength)),)),)


class LTX2UpsamplerLoader:
    DESCRIPTION = ("Loads a latent upsampler: the x2 spatial one of the two-stage pipelines, or DFR's temporal x2 one "
                   "(it doubles the frames; LTX-2 DFR's temporal_upsampler), told apart by the file's header.")
    CATEGORY = CATEGORY
    RETURN_TYPES = (UPSAMPLER,)
    RETURN_NAMES = ("upsampler",)
    FUNCTION = "load"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "upscale_model_name": (_options("latent_upscale_models"), {
                "tooltip": "ltx-2-spatial-upscaler-x2-*.safetensors (2.0), ltx-2.3-spatial-upscaler-x2-* (2.3), "
                           "ltx-2.5-latent-spatial-upscaler-x2-* (2.5) or DFR's temporal x2 upsampler, from "
                           "models/latent_upscale_models"}),
            "model": (MODEL, {"tooltip": "the model it upsamples for (its device and dtype)"}),
        }}

    @classmethod
    def VALIDATE_INPUTS(cls, upscale_model_name: str | None = None, input_types: dict | None = None):
        links = input_types  # None: called without ComfyUI, a None value then counts as linked
        return link_problem(cls, links) or file_problem("latent upsampler", upscale_model_name, links) or True

    def load(self, upscale_model_name: str, model: ModelHandle):
        param = model.check_loaded().weights
        path = bridge.model_path("latent_upscale_models", upscale_model_name)
        if model.memory is None:
            return (load_upsampler(path, device=param.device, dtype=param.dtype, temporal=None),)
        return (offload(load_upsampler(path, dtype=param.dtype, temporal=None), param.device),)  # visits while it upsamples
