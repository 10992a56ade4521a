"""The whole pipeline in one node (one-stage, two-stage, distilled), for users without a graph and for API users."""

from __future__ import annotations

import contextlib

import torch

from ltx2_core import DEFAULT_NEGATIVE_PROMPT, MODES, Models, PromptEncoder, Request, fused_loras, generate, load_lora
from ltx2_core.conditioning.images import ImageCondition
from ltx2_core.geometry import VIDEO_SPACE_SCALE, latent_shape
from ltx2_core.model.upsampler import LatentUpsampler
from ltx2_core.pipeline import LocalSampler
from ltx2_core.preview import LatentPreview, rgb_projection
from ltx2_core.runtime import WorkerSampler

from . import bridge
from .decode import comfy_outputs
from .handles import MODEL, TEXT_ENCODER, UPSAMPLER, ModelHandle
from .images import IMAGES, at_frames
from .sampling import MAX_SEED, check_size, frames_problem
from .text import prompt_problem, text_problem
from .validation import file_problem, memory_problem, stated_limits

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
    def VALIDATE_INPUTS(cls, frames: int | None = None):
        """Only frames, so a problem is reported on it alone: ComfyUI checks the other inputs itself (the mode, the
        sizes' range, the LoRA in models/loras). The rest (the prompt, multiples of 32 or 64, the LoRA's kind, image
        frames) is checked first thing when the node runs."""
        return stated_limits(cls, "frames", frames) or frames_problem(frames) or True

    def generate(self, model: ModelHandle, text_encoder: PromptEncoder, prompt: str, negative_prompt: str,
                 mode: str, width: int, height: int, frames: int, fps: float, seed: int, steps: int,
                 upsampler: LatentUpsampler | None = None, distilled_lora: str = NO_LORA,
                 images: tuple[ImageCondition, ...] = (), unique_id: str | None = None):
        images = _check_request(prompt, negative_prompt, mode, width, height, frames, distilled_lora, images)
        model = model.check_loaded()
        if model.workers is None and (problem := memory_problem(model.config, model.weights.dtype,
                                                                 model.weights.device, frames, height, width, fps)):
            raise ValueError(problem)
        lora = None if distilled_lora == NO_LORA else load_lora(bridge.model_path("loras", distilled_lora))
        models = Models(model.transformer, text_encoder, model.decoders, upsampler, lora, model.video_encoder)
        request = Request(prompt, negative_prompt or None, width, height, frames, fps, steps or None, seed, mode,
                          images=images)
        projection = rgb_projection(model.decoders.video) if bridge.IN_COMFYUI else None
        if model.workers is not None:  # the handle's LoRAs go to the workers with every stage
            sampler = WorkerSampler(model.workers, model.loras, bridge.interrupt_requested, preview=projection)
            fused, ready = None, projection is not None and sampler.take_preview or None
        else:
            previews = projection is not None and StagePreviews(projection, frames, height, width) or None
            sampler = LocalSampler(model.transformer, passes_per_forward=model.passes_per_forward,
                                   observe=previews and previews.observe)
            fused, ready = model.loras and fused_loras(model.transformer, model.loras), previews and previews.ready
        bars = {}

        def progress(stage: str, done: int, total: int) -> None:
            bar = bars.setdefault(stage, bridge.progress_bar(total, unique_id, ready))
            if bar is not None:
                bar(done, total)

        with fused or contextlib.nullcontext(), bridge.interrupts():
            tiling = {} if model.memory is None else {"tiling": model.memory.tiling()}
            return comfy_outputs(generate(request, models, progress, sampler=sampler,
                                          passes_per_forward=model.passes_per_forward, **tiling))


def _check_request(prompt: str, negative_prompt: str, mode: str, width: int, height: int, frames: int,
                   distilled_lora: str, images: tuple[ImageCondition, ...]) -> tuple[ImageCondition, ...]:
    """First thing when the node runs, before any model work: ValueError naming the fix; the images resolved."""
    if mode not in MODES:
        raise ValueError(f"mode: {str(mode)[:40]!r} is not one of {', '.join(MODES)}")
    if problem := prompt_problem(prompt) or text_problem("negative_prompt", negative_prompt) or frames_problem(frames):
        raise ValueError(problem)
    halved = mode in ("two-stage", "distilled")
    check_size(width, height, 64 if halved else 32, f" (the {mode} pipeline samples at half size first)"
               if halved else "")
    if distilled_lora != NO_LORA and (problem := file_problem("LoRA", distilled_lora)):
        raise ValueError(problem.replace("lora_name", "distilled_lora", 1))
    return at_frames(images, frames)


class StagePreviews:
    """The sampler's per-step previews across a generation's stages: a two-stage run samples at half size first,
    so each stage's latent size has its own LatentPreview (told apart by the token count)."""

    def __init__(self, projection: tuple[torch.Tensor, torch.Tensor], frames: int, height: int, width: int) -> None:
        latent_frames = latent_shape(frames, height, width)[0]
        self.sizes = sorted({(latent_frames * (height // s) * (width // s), latent_frames, height // s, width // s)
                             for s in (VIDEO_SPACE_SCALE, 2 * VIDEO_SPACE_SCALE) if height // s and width // s})
        self.previews = {size[0]: LatentPreview(projection, *size[1:]) for size in self.sizes}
        self.current: LatentPreview | None = None

    def observe(self, video_tokens: torch.Tensor, audio_tokens: torch.Tensor) -> None:
        fitting = [count for count, *_ in self.sizes if count <= video_tokens.shape[1]]  # keyframe tokens follow
        if fitting:
            self.current = self.previews[fitting[-1]]
            self.current.observe(video_tokens, audio_tokens)

    def ready(self):
        return self.current.ready() if self.current is not None else None
