"""Video in: control videos for an IC-LoRA (depth, pose, edges; chainable) and a retake of a clip's time span, both
from ComfyUI's IMAGE frames (Load Video -> Get Video Components, or any IMAGE batch) and AUDIO."""

from __future__ import annotations

import torch

from ltx2_core.conditioning.control import ControlCondition
from ltx2_core.conditioning.retake import Retake, check_span
from ltx2_core.errors import SettingError
from ltx2_core.loader.lora import DOWNSCALE_KEY
from ltx2_core.video_io import VideoFrames

from .audio import comfy_sound
from .handles import GUIDES, RETAKE, Guide
from .validation import limits_problem, link_problem, setting_problem

CATEGORY = "LTX-2/conditioning"
KEEP_INPUTS = {"regenerate_video": "keep_video", "regenerate_audio": "keep_audio"}  # ltx2_core's -> the node's


class LTX2VideoGuide:
    DESCRIPTION = ("A control video (depth, pose, edges) guiding the generation through an IC-LoRA, which the model "
                   "must carry (LTX-2 LoRA Loader); its first frames are used (a longer video is cut to the clip's "
                   "length, as the reference), resized to the sampled size divided by the IC-LoRA's "
                   f"{DOWNSCALE_KEY}. Every LoRA on the model guides as the IC-LoRA: a plain LoRA (style, distilled) "
                   "cannot read a control video, and one whose file states no factor looks like an IC-LoRA released "
                   "without it, so it is taken at factor 1 with a warning in the log. Chain several; wire `guides` "
                   "into the sampler (stage 1 of a two-stage chain only, as the reference) or the generate node.")
    CATEGORY = CATEGORY
    RETURN_TYPES = (GUIDES,)
    RETURN_NAMES = ("guides",)
    OUTPUT_TOOLTIPS = ("the control videos so far (this one last)",)
    FUNCTION = "add"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "images": ("IMAGE", {"tooltip": "the control video's frames (Load Video -> Get Video Components, or any "
                                 "IMAGE batch), at least as many as the clip (fewer are refused; the first as many "
                                 "as the clip are used, the rest dropped, as the reference); resized to cover and "
                                 "centre-cropped"}),
            "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.01,
                                   "tooltip": "1 keeps the control's tokens clean (the reference); lower lets the "
                                              "model denoise them with the rest, loosening the control"}),
            "attention_strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.01,
                                             "tooltip": "how strongly the generated tokens attend to the control's "
                                                        "(the reference's conditioning attention strength): below 1 "
                                                        "the control steers more gently"}),
        }, "optional": {
            "guides": (GUIDES, {"tooltip": "earlier guides to add this one to"}),
            "attention_mask": ("MASK", {"tooltip": "where the control is attended (1) or ignored (0), per pixel "
                                        "and frame (e.g. Image To Mask of a mask video; its first frames as the "
                                        "clip's), times attention_strength"}),
        }}

    @classmethod
    def VALIDATE_INPUTS(cls, strength: float | None = None, attention_strength: float | None = None):
        """The two numbers' limits, NaN too (ComfyUI's own range check lets NaN pass)."""
        return limits_problem(cls, dict(strength=strength, attention_strength=attention_strength)) or True

    def add(self, images: torch.Tensor, strength: float = 1.0, attention_strength: float = 1.0,
            guides: tuple[Guide, ...] = (), attention_mask: torch.Tensor | None = None):
        VideoFrames(images, 24.0).info()  # shape, empty batch, dtype, range: refused now (the rate is unused)
        if attention_mask is not None:  # its kind and range now; its frames once the clip's are known
            ControlCondition("", attention_mask=attention_mask).check_mask(1)
        return (tuple(guides) + (Guide(images, float(strength), float(attention_strength), attention_mask),),)


class LTX2Retake:
    DESCRIPTION = ("Regenerates the time span [start, end) of a clip (its frames and, when given, its sound) with "
                   "the prompt and keeps the rest, as the reference's retake. Wire it into the generate node, whose "
                   "clip then is this one: its size, frame count (8k+1, at least 9) and fps; one stage (mode "
                   "one-stage or distilled).")
    CATEGORY = CATEGORY
    RETURN_TYPES = (RETAKE,)
    RETURN_NAMES = ("retake",)
    OUTPUT_TOOLTIPS = ("the clip, its sound and the span, for the generate node's retake input",)
    FUNCTION = "make"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "images": ("IMAGE", {"tooltip": "the clip's frames (Load Video -> Get Video Components): 8k+1 frames "
                                 "at multiples of 32 pixels"}),
            "fps": ("FLOAT", {"default": 24.0, "min": 1.0, "max": 120.0, "step": 0.01,
                              "tooltip": "the clip's frame rate (wire Get Video Components' fps)"}),
            "start": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 86400.0, "step": 0.01,
                                "tooltip": "seconds into the clip where the regenerated span starts"}),
            "end": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 86400.0, "step": 0.01,
                              "tooltip": "seconds into the clip where it ends (after start, at most the clip's "
                                         "frames / fps)"}),
            "keep_video": ("BOOLEAN", {"default": False, "tooltip": "keep every frame; only the sound of the span "
                                       "is regenerated"}),
            "keep_audio": ("BOOLEAN", {"default": False, "tooltip": "keep the whole sound; only the frames of the "
                                       "span are regenerated"}),
        }, "optional": {
            "audio": ("AUDIO", {"tooltip": "the clip's sound (Get Video Components' audio; the first of a batch), "
                                "held outside the span; without it the sound is generated over the whole clip"}),
        }}

    @classmethod
    def VALIDATE_INPUTS(cls, fps: float | None = None, start: float | None = None, end: float | None = None,
                        keep_video: bool | None = False, keep_audio: bool | None = False,
                        input_types: dict | None = None):
        """The span and what is kept, when queued, by ltx2_core's rule (`check_span`): finite times, start before
        end, not both streams kept when a sound is linked (input_types). The span's end against the clip's length
        is checked when the node runs."""
        links = input_types  # None: called without ComfyUI, a None value then counts as linked
        values = dict(fps=fps, start=start, end=end, keep_video=keep_video, keep_audio=keep_audio)
        if problem := limits_problem(cls, values, links) or link_problem(cls, links):
            return problem
        if None in (start, end, keep_video, keep_audio):
            return True
        return setting_problem(lambda: check_span(start, end, not keep_video, not keep_audio, "audio" in (links or {})),
                               KEEP_INPUTS) or True

    def make(self, images: torch.Tensor, fps: float, start: float, end: float, keep_video: bool = False,
             keep_audio: bool = False, audio: dict | None = None):
        sound = comfy_sound(audio) if audio is not None else None  # Get Video Components gives None: no sound
        retake = Retake(VideoFrames(images, float(fps)), float(start), float(end), not keep_video, not keep_audio,
                        sound)
        try:
            retake.check()  # the frames, the sound, the span against the clip: now, before any model work
        except SettingError as exc:
            raise ValueError(f"{KEEP_INPUTS.get(exc.setting, exc.setting)}: {exc}") from None
        return (retake,)
