"""A clip longer than one sampling window, with its sound: overlapping windows that continue each other's video
and audio (ltx2_core.long_video), decoded once."""

from __future__ import annotations

from collections.abc import Collection

from ltx2_core import Models, PromptEncoder, Request, Windows, frames_for, load_lora
from ltx2_core.conditioning.images import ImageCondition
from ltx2_core.loader.lora import split_ic_loras
from ltx2_core.long_video import generate_long
from ltx2_core.memory.plan import MemoryPlanError
from ltx2_core.pipeline import request_job
from ltx2_core.model.upsampler import LatentUpsampler
from ltx2_core.preview import StagePreviews, rgb_projection
from ltx2_core.windows import DEFAULT_OVERLAP, DEFAULT_WINDOW

from . import bridge
from .decode import comfy_outputs, decode_spread
from .generate import (NO_LORA, SETTING_INPUTS, LTX2Generate, StageBars, _check_request, distilled_lora_problem,
                       given_inputs, request_problem)
from .handles import ModelHandle
from .images import IMAGES
from .sampling import MAX_FRAMES
from .text import prompt_problem, text_problem
from .validation import limits_problem, link_problem, setting_problem

MAX_SECONDS = 600.0


class LTX2GenerateLong:
    DESCRIPTION = ("A long clip with its sound (e.g. 20 s): overlapping windows, each holding the previous window's "
                   "last frames of video AND audio, so picture and sound run on across the joins; decoded once. "
                   "One prompt, or one per window.")
    CATEGORY = "LTX-2/generate"
    RETURN_TYPES = ("IMAGE", "AUDIO", "FLOAT")
    RETURN_NAMES = ("images", "audio", "fps")
    OUTPUT_TOOLTIPS = ("the whole clip's frames", "the whole clip's sound", "its frame rate")
    FUNCTION = "generate"

    @classmethod
    def INPUT_TYPES(cls):
        """The generate node's inputs (the same tooltips and limits) with duration, window and overlap in place of
        frames, and the window prompts."""
        base = LTX2Generate.INPUT_TYPES()
        same, optional = base["required"], base["optional"]
        return {
            "required": {
                "model": same["model"], "text_encoder": same["text_encoder"],
                "prompt": ("STRING", {"multiline": True, "default": "", "tooltip": "what to see and hear (every "
                                      "window's, unless window_prompts gives them)"}),
                "negative_prompt": same["negative_prompt"], "mode": same["mode"], "width": same["width"],
                "height": same["height"],
                "duration": ("FLOAT", {"default": 20.0, "min": 0.05, "max": MAX_SECONDS, "step": 0.5,
                                       "tooltip": "seconds of clip (the fewest 8k+1 frames lasting that long)"}),
                "fps": same["fps"],
                "window": ("INT", {"default": DEFAULT_WINDOW, "min": 17, "max": MAX_FRAMES, "step": 8,
                                   "tooltip": "pixel frames sampled at once, 8k+1 (121 = 5 s at 24 fps); longer "
                                              "windows need more memory and make fewer joins"}),
                "overlap": ("INT", {"default": DEFAULT_OVERLAP, "min": 8, "max": MAX_FRAMES, "step": 8,
                                    "tooltip": "pixel frames neighbouring windows share, a multiple of 8, at most "
                                               "window - 9 (24 = 1 s at 24 fps)"}),
                "seed": ("INT", same["seed"][1] | {"tooltip": "the noise seed (window n uses seed + n)"}),
                "steps": same["steps"],
            },
            "optional": {
                "window_prompts": ("STRING", {"multiline": True, "default": "",
                                              "tooltip": "one prompt per line, for window 1, 2, ... in order (the "
                                                         "last repeats; more lines than windows are refused); "
                                                         "empty: the prompt for every window"}),
                "upsampler": optional["upsampler"], "distilled_lora": optional["distilled_lora"],
                "images": (IMAGES, {"tooltip": "images held at frames of the first window (LTX-2 Image "
                                    "Condition): start the clip from a picture"}),
            },
            "hidden": {"unique_id": "UNIQUE_ID"},
        }

    @classmethod
    def VALIDATE_INPUTS(cls, prompt: str | None = None, negative_prompt: str | None = None, mode: str | None = None,
                        width: int | None = None, height: int | None = None, duration: float | None = None,
                        fps: float | None = None, window: int | None = None, overlap: int | None = None,
                        steps: int | None = None, window_prompts: str | None = "",
                        distilled_lora: str | None = NO_LORA, input_types: dict | None = None):
        """As the generate node's, with the windows: window, overlap and window prompts against the clip's length
        (more prompts than windows refused); known only when the node runs: the images' frames."""
        links = input_types  # None: called without ComfyUI, a None value then counts as linked
        values = dict(prompt=prompt, negative_prompt=negative_prompt, mode=mode, width=width, height=height,
                      duration=duration, fps=fps, window=window, overlap=overlap, steps=steps,
                      window_prompts=window_prompts)  # distilled_lora: a file, `distilled_lora_problem`
        return (limits_problem(cls, values, links) or link_problem(cls, links)
                or long_problem(prompt, negative_prompt, mode, width, height, duration, fps, window, overlap, steps,
                                window_prompts, distilled_lora, links)
                or distilled_lora_problem(distilled_lora, links) or True)

    def generate(self, model: ModelHandle, text_encoder: PromptEncoder, prompt: str, negative_prompt: str,
                 mode: str, width: int, height: int, duration: float, fps: float, window: int, overlap: int,
                 seed: int, steps: int, window_prompts: str = "", upsampler: LatentUpsampler | None = None,
                 distilled_lora: str = NO_LORA, images: tuple[ImageCondition, ...] = (),
                 unique_id: str | None = None):
        linked = given_inputs(images=images, upsampler=upsampler)
        if problem := long_problem(prompt, negative_prompt, mode, width, height, duration, fps, window, overlap,
                                   steps, window_prompts, distilled_lora, linked):
            raise ValueError(problem)  # the queue-time checks again, before any model work
        frames, prompts = frames_for(duration, fps), window_lines(window_prompts)
        windows = Windows(window, overlap, prompts)
        prompt = prompt if prompt.strip() or not prompts else prompts[0]  # the window prompts may stand alone
        images = _check_request(prompt, negative_prompt, mode, width, height, frames, fps, steps, distilled_lora,
                                images, linked)
        request = Request(prompt, negative_prompt or None, width, height, frames, fps, steps or None, seed, mode,
                          images=images, windows=windows)
        request.check()  # the windows, and what they cannot continue, before the model is touched
        model = model.check_loaded()
        job = request_job(request, model.config, model.host.tiling())
        if problem := model.host.memory_problem(job, model.decoders, upsampler):
            raise MemoryPlanError(problem)
        lora = None if distilled_lora == NO_LORA else load_lora(bridge.model_path("loras", distilled_lora))
        every_stage, ic_loras = split_ic_loras(model.loras)
        models = Models(model.host.transformer, text_encoder, model.decoders, upsampler, lora, model.video_encoder,
                        None, ic_loras)
        window_frames = sorted({w.frames for w in windows.plan(frames, fps, prompt)})  # the last may be shorter
        previews = (StagePreviews(rgb_projection(model.decoders.video), window_frames, height, width)
                    if bridge.IN_COMFYUI else None)
        with model.host.sampler(every_stage, previews=previews, should_stop=bridge.interrupt_requested) as \
                (sampler, ready), bridge.interrupts():
            return comfy_outputs(generate_long(request, models, StageBars(unique_id, ready), sampler=sampler,
                                               tiling=model.host.tiling(), distribution=decode_spread(model)))


def window_lines(text: str | None) -> tuple[str, ...]:
    """The window prompts: one per non-empty line."""
    return tuple(line.strip() for line in (text or "").splitlines() if line.strip())


def long_problem(prompt: str | None, negative_prompt: str | None, mode: str | None, width: int | None,
                 height: int | None, duration: float | None, fps: float | None, window: int | None,
                 overlap: int | None, steps: int | None, window_prompts: str | None, distilled_lora: str | None,
                 linked: Collection[str] | None) -> str | None:
    """Why the long video node's settings cannot run (None when they can, or depend on a value not known yet):
    the prompts, the clip's frames for the duration, the windows that cut it (ltx2_core's `Windows.check`), and the
    generate node's rules for the mode and sizes."""
    prompts = window_lines(window_prompts) if isinstance(window_prompts, str) else ()
    if problem := ((prompt_problem(prompt) if not prompts else text_problem("prompt", prompt))
                   or text_problem("negative_prompt", negative_prompt) or text_problem("window_prompts",
                                                                                      window_prompts)):
        return problem
    frames = None
    if duration is not None and fps is not None:
        if problem := setting_problem(lambda: frames_for(duration, fps)):
            return problem
        frames = frames_for(duration, fps)
        if window is not None and overlap is not None and (problem := setting_problem(
                lambda: Windows(window, overlap, prompts).check(frames, fps), SETTING_INPUTS)):
            return problem
    return request_problem(mode, width, height, frames, fps, steps, False, distilled_lora, linked)
