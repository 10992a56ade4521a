"""The whole pipeline in one node (one-stage, two-stage, distilled), for users without a graph and for API users."""

from __future__ import annotations

import contextlib

from ltx2_core import DEFAULT_NEGATIVE_PROMPT, MODES, Models, PromptEncoder, Request, fused_loras, generate, load_lora
from ltx2_core.conditioning import ImageCondition
from ltx2_core.model.upsampler import LatentUpsampler
from ltx2_core.runtime import WorkerSampler

from . import bridge
from .decode import comfy_outputs
from .handles import MODEL, TEXT_ENCODER, UPSAMPLER, ModelHandle
from .images import IMAGES, at_frames
from .loaders import file_problem
from .sampling import MAX_SEED, size_problem
from .text import prompt_problem

NO_LORA = "none"


class LTX2Generate:
    DESCRIPTION = ("Text to video + audio in one node: prompts, sampling (and x2 refinement), decoding, with the "
                   "release's guidance and steps.")
    CATEGORY = "LTX-2/generate"
    RETURN_TYPES = ("IMAGE", "AUDIO", "FLOAT")
    RETURN_NAMES = ("images", "audio", "fps")
    FUNCTION = "generate"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": (MODEL, {"tooltip": "the LTX-2 model (with its LoRAs)"}),
                "text_encoder": (TEXT_ENCODER, {"tooltip": "from LTX2 Text Encoder Loader"}),
                "prompt": ("STRING", {"multiline": True, "default": "", "tooltip": "what to see and hear"}),
                "negative_prompt": ("STRING", {"multiline": True, "default": DEFAULT_NEGATIVE_PROMPT,
                                               "tooltip": "what to avoid (used by CFG)"}),
                "mode": (list(MODES), {"default": "one-stage", "tooltip": "one-stage: full size with guidance; "
                         "two-stage: half size, x2 upsample, 3 refinement steps (upsampler + distilled LoRA); "
                         "distilled: a distilled checkpoint, 8 + 3 steps (upsampler)"}),
                "width": ("INT", {"default": 768, "min": 32, "max": 8192, "step": 32, "tooltip": "pixels, a multiple "
                                  "of 32 (64 for two-stage and distilled)"}),
                "height": ("INT", {"default": 512, "min": 32, "max": 8192, "step": 32, "tooltip": "pixels, a "
                                   "multiple of 32 (64 for two-stage and distilled)"}),
                "frames": ("INT", {"default": 121, "min": 1, "max": 1441, "step": 8, "tooltip": "pixel frames, 8k+1"}),
                "fps": ("FLOAT", {"default": 24.0, "min": 1.0, "max": 120.0, "step": 0.01, "tooltip": "frame rate"}),
                "seed": ("INT", {"default": 0, "min": 0, "max": MAX_SEED, "control_after_generate": True,
                                 "tooltip": "the noise seed"}),
                "steps": ("INT", {"default": 0, "min": 0, "max": 200, "tooltip": "stage-1 steps; 0: the release's "
                                  "(40 for LTX-2.0, 30 for 2.3)"}),
            },
            "optional": {
                "upsampler": (UPSAMPLER, {"tooltip": "the x2 latent upsampler (two-stage and distilled)"}),
                "distilled_lora": ([NO_LORA] + bridge.file_options("loras"), {
                    "default": NO_LORA, "tooltip": "ltx-2-*-distilled-lora-384.safetensors for the two-stage "
                                                   "refinement (models/loras)"}),
                "images": (IMAGES, {"tooltip": "images held at frames (LTX-2 Image Condition): image-to-video, "
                                    "last frame, keyframes"}),
            },
            "hidden": {"unique_id": "UNIQUE_ID"},
        }

    @classmethod
    def VALIDATE_INPUTS(cls, mode: str | None = None, width: int | None = None, height: int | None = None,
                        frames: int | None = None, prompt: str | None = None, distilled_lora: str | None = None):
        lora_problem = distilled_lora not in (None, NO_LORA) and file_problem("loras", distilled_lora, "LoRA")
        if isinstance(lora_problem, str):
            return lora_problem
        if problem := prompt_problem(prompt):
            return problem
        if mode in ("two-stage", "distilled") and None not in (width, height) and (width % 64 or height % 64):
            return f"the {mode} pipeline samples at half size first: width and height must be multiples of 64"
        return size_problem(width, height, frames) or True

    def generate(self, model: ModelHandle, text_encoder: PromptEncoder, prompt: str, negative_prompt: str,
                 mode: str, width: int, height: int, frames: int, fps: float, seed: int, steps: int,
                 upsampler: LatentUpsampler | None = None, distilled_lora: str = NO_LORA,
                 images: tuple[ImageCondition, ...] = (), unique_id: str | None = None):
        model = model.check_loaded()
        lora = None if distilled_lora == NO_LORA else load_lora(bridge.model_path("loras", distilled_lora))
        models = Models(model.transformer, text_encoder, model.decoders, upsampler, lora, model.video_encoder)
        request = Request(prompt, negative_prompt or None, width, height, frames, fps, steps or None, seed, mode,
                          images=at_frames(images, frames))
        bars = {}

        def progress(stage: str, done: int, total: int) -> None:
            bar = bars.setdefault(stage, bridge.progress_bar(total, unique_id))
            if bar is not None:
                bar(done, total)

        if model.workers is not None:  # the handle's LoRAs go to the workers with every stage
            sampler, fused = WorkerSampler(model.workers, model.loras, bridge.interrupt_requested), None
        else:
            sampler, fused = None, model.loras and fused_loras(model.transformer, model.loras)
        with fused or contextlib.nullcontext(), bridge.interrupts():
            tiling = {} if model.memory is None else {"tiling": model.memory.tiling()}
            return comfy_outputs(generate(request, models, progress, sampler=sampler,
                                          passes_per_forward=model.passes_per_forward, **tiling))
