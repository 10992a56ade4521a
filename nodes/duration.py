"""LTX-2.5's clip length from the prompt (the duration head) for modular graphs: frames to wire into LTX-2 Empty
Latent's frames (the generate node takes `length` auto itself)."""

from __future__ import annotations

from ltx2_core.duration import AutoFrames, predict_length

from .handles import CONDITIONING, MODEL, Conditioning, ModelHandle
from .validation import limits_problem

MIN_SECONDS, MAX_SECONDS = 0.05, 600.0


def seconds_inputs() -> dict:
    """The bounds of an automatic length (1.2.0's defaults: 1 s and 20 s), as the nodes take them."""
    return {"min_seconds": ("FLOAT", {"default": 1.0, "min": MIN_SECONDS, "max": MAX_SECONDS, "step": 0.05,
                                      "tooltip": "the predicted length clamped from below (seconds)"}),
            "max_seconds": ("FLOAT", {"default": 20.0, "min": MIN_SECONDS, "max": MAX_SECONDS, "step": 0.05,
                                      "tooltip": "the predicted length clamped from above (seconds)"})}


def bounds_problem(min_seconds: float | None, max_seconds: float | None) -> str | None:
    """Why the bounds cannot clamp a length (None when fine or not known yet)."""
    if min_seconds is not None and max_seconds is not None and min_seconds > max_seconds:
        return f"min_seconds {min_seconds:g} is above max_seconds {max_seconds:g}; lower it or raise max_seconds"
    return None


class LTX2PredictLength:
    DESCRIPTION = ("LTX-2.5's duration head: the clip's natural length from the encoded prompt (as Lightricks' "
                   "pipelines choose it when no frame count is given), as 8k+1 frames at fps within min..max "
                   "seconds. Wire frames into LTX-2 Empty Latent's frames. Needs a model whose files carry the head.")
    CATEGORY = "LTX-2/conditioning"
    RETURN_TYPES = ("INT", "FLOAT")
    RETURN_NAMES = ("frames", "seconds")
    OUTPUT_TOOLTIPS = ("the clip's pixel frames (8k+1) at fps", "the head's own prediction in seconds, unclamped")
    FUNCTION = "predict"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "model": (MODEL, {"tooltip": "an LTX-2.5 model whose files carry the duration head"}),
            "conditioning": (CONDITIONING, {"tooltip": "from LTX-2 Text Encode: the head reads the positive prompt"}),
            "fps": ("FLOAT", {"default": 24.0, "min": 1.0, "max": 120.0, "step": 0.01,
                              "tooltip": "the clip's frame rate (set the latent's to the same)"}),
            **seconds_inputs(),
            "audio_only": ("BOOLEAN", {"default": False, "tooltip": "text to audio: the head reads the prompt's "
                                       "audio contexts alone, as the reference's text-to-audio pipeline"}),
        }}

    @classmethod
    def VALIDATE_INPUTS(cls, fps: float | None = None, min_seconds: float | None = None,
                        max_seconds: float | None = None):
        values = dict(fps=fps, min_seconds=min_seconds, max_seconds=max_seconds)
        return limits_problem(cls, values) or bounds_problem(min_seconds, max_seconds) or True

    def predict(self, model: ModelHandle, conditioning: Conditioning, fps: float, min_seconds: float,
                max_seconds: float, audio_only: bool = False):
        model = model.check_loaded()
        frames, seconds = predict_length(model.duration_head, conditioning.positive, float(fps),
                                         AutoFrames(float(min_seconds), float(max_seconds)), bool(audio_only),
                                         model.config.version.value)
        return frames, seconds
