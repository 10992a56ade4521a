"""LTX-2 Step Cache: ComfyUI's EasyCache settings for our samplers (ltx2_core.sampling.cache)."""

from __future__ import annotations

from ltx2_core.sampling.cache import CacheSettings

from .validation import limits_problem

CATEGORY = "LTX-2/sampling"
STEP_CACHE = "LTX2_STEP_CACHE"  # a ltx2_core CacheSettings


class LTX2StepCache:
    DESCRIPTION = ("Step caching for LTX-2 Sampler: steps where the input barely moved reuse each guidance pass's "
                   "last transformer output change (video and audio), decided as ComfyUI's EasyCache node decides "
                   "(the same settings and defaults). One host read per step; not with cuda_graphs.")
    CATEGORY = CATEGORY
    RETURN_TYPES = (STEP_CACHE,)
    RETURN_NAMES = ("cache",)
    FUNCTION = "make"

    @classmethod
    def INPUT_TYPES(cls):
        defaults = CacheSettings()
        return {"required": {
            "reuse_threshold": ("FLOAT", {"default": defaults.reuse_threshold, "min": 0.0, "max": 3.0, "step": 0.01,
                                          "tooltip": "higher skips more steps, with more error (EasyCache's 0.2)"}),
            "start_percent": ("FLOAT", {"default": defaults.start_percent, "min": 0.0, "max": 1.0, "step": 0.01,
                                        "tooltip": "no step is skipped before this fraction of the sampling"}),
            "end_percent": ("FLOAT", {"default": defaults.end_percent, "min": 0.0, "max": 1.0, "step": 0.01,
                                      "tooltip": "no step is skipped after this fraction of the sampling"}),
        }}

    @classmethod
    def VALIDATE_INPUTS(cls, reuse_threshold: float | None = None, start_percent: float | None = None,
                        end_percent: float | None = None):
        """The limits the UI shows, NaN too (ComfyUI's own range check lets NaN pass)."""
        values = {"reuse_threshold": reuse_threshold, "start_percent": start_percent, "end_percent": end_percent}
        return limits_problem(cls, values) or True

    def make(self, reuse_threshold: float, start_percent: float, end_percent: float):
        return (CacheSettings(reuse_threshold=reuse_threshold, start_percent=start_percent, end_percent=end_percent),)
