"""Dub-It in one node: re-voice a clip (its frames the IC-LoRA reference, its sound the audio reference), as
ltx-pipelines 1.2.0's `DubItPipeline` (`ltx2_core.conditioning.dub`)."""

from __future__ import annotations

import torch

from ltx2_core import Models, Request
from ltx2_core.conditioning.dub import MIN_FRAMES, Dub
from ltx2_core.conditioning.images import ImageCondition
from ltx2_core.errors import SettingError
from ltx2_core.loader.lora import DOWNSCALE_KEY, lora_reference_scale
from ltx2_core.memory.plan import MemoryPlanError
from ltx2_core.model.upsampler import LatentUpsampler
from ltx2_core.preview import StagePreviews, rgb_projection
from ltx2_core.pipeline import check_request, generator_on, request_job, sample_request
from ltx2_core.request import check_settings
from ltx2_core.stages import decode
from ltx2_core.video_io import VideoFrames

from . import bridge
from .audio import comfy_sound
from .decode import comfy_outputs
from .generate import StageBars
from .handles import CONDITIONING, MODEL, UPSAMPLER, Conditioning, ModelHandle
from .images import IMAGES, at_frames
from .sampling import MAX_SEED
from .validation import file_problem, limits_problem, link_problem, setting_problem

NO_AUDIO = ("Dub-It re-voices the clip's own sound: connect its AUDIO (Get Video Components' audio; a clip without "
            "sound gives none: add a sound track to it first)")
PROMPT = "the prompt of the linked conditioning"  # Request needs one; the node samples the encoded conditioning


def ic_lora_problem(name: str | None, links: dict | None = None) -> str | None:
    """Why the file picked as the Dub-It IC-LoRA cannot be it (not a LoRA of models/loras, no reference downscale
    factor in its metadata); None when fine or linked. Headers only."""
    if name is None and (links is None or "ic_lora" in links):
        return None  # known when the node runs
    if problem := file_problem("LoRA", name):
        return problem.replace("lora_name", "ic_lora", 1)
    try:
        factor = lora_reference_scale(bridge.model_path("loras", name))
    except ValueError as exc:
        return f"ic_lora: {exc}"
    if factor is None:
        return (f"ic_lora: {name} states no {DOWNSCALE_KEY} in its metadata, so it is not an IC-LoRA: pick the "
                "Dub-It IC-LoRA (models/loras)")
    return None


class LTX2Dub:
    DESCRIPTION = ("Dub-It: re-voices a clip with the prompt, as the reference's DubItPipeline. The clip's frames "
                   "guide the video through the Dub-It IC-LoRA (fused in both stages), its sound is the audio "
                   "reference; two distilled stages (a distilled model and the x2 upsampler). The output lasts the "
                   "clip's first 8k+1 frames at its fps, at width x height.")
    CATEGORY = "LTX-2/generate"
    RETURN_TYPES = ("IMAGE", "AUDIO", "FLOAT")
    RETURN_NAMES = ("images", "audio", "fps")
    OUTPUT_TOOLTIPS = ("the dubbed frames", "the new sound (stage 1's, as the reference)", "the clip's frame rate")
    FUNCTION = "dub"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": (MODEL, {"tooltip": "a distilled LTX-2 model (its other LoRAs apply in both stages)"}),
                "upsampler": (UPSAMPLER, {"tooltip": "the x2 latent upsampler (stage 2)"}),
                "positive": (CONDITIONING, {"tooltip": "the prompt (LTX-2 Text Encode); Dub-It is not guided, so "
                                            "its negative prompt is unused"}),
                "clip": ("IMAGE", {"tooltip": f"the clip's frames (Load Video -> Get Video Components), at least "
                                   f"{MIN_FRAMES}; the first 8k+1 are dubbed"}),
                "audio": ("AUDIO", {"tooltip": "the sound reference: the clip's sound (Get Video Components' "
                                    "audio), at least as long as the clip; any other AUDIO goes through the same "
                                    "maths"}),
                "fps": ("FLOAT", {"default": 24.0, "min": 1.0, "max": 120.0, "step": 0.01,
                                  "tooltip": "the clip's frame rate (wire Get Video Components' fps)"}),
                "ic_lora": (bridge.file_options("loras"), {"tooltip": "the Dub-It IC-LoRA (models/loras; its "
                            f"metadata states a {DOWNSCALE_KEY})"}),
                "width": ("INT", {"default": 768, "min": 64, "max": 8192, "step": 64,
                                  "tooltip": "pixels, a multiple of 64"}),
                "height": ("INT", {"default": 512, "min": 64, "max": 8192, "step": 64,
                                   "tooltip": "pixels, a multiple of 64"}),
                "seed": ("INT", {"default": 0, "min": 0, "max": MAX_SEED, "control_after_generate": True,
                                 "tooltip": "the noise seed"}),
                "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.01,
                                       "tooltip": "the clip's hold as the IC-LoRA reference (1: kept clean, the "
                                                  "reference's default)"}),
            },
            "optional": {
                "images": (IMAGES, {"tooltip": "images held at frames (LTX-2 Image Condition)"}),
            },
            "hidden": {"unique_id": "UNIQUE_ID"},
        }

    @classmethod
    def VALIDATE_INPUTS(cls, fps: float | None = None, ic_lora: str | None = None, width: int | None = None,
                        height: int | None = None, strength: float | None = None, input_types: dict | None = None):
        """When queued: the limits (NaN too), the size (multiples of 64), the IC-LoRA's kind. The clip's frames and
        sound are known when the node runs."""
        links = input_types
        values = dict(fps=fps, width=width, height=height, strength=strength)
        return (limits_problem(cls, values, links) or link_problem(cls, links) or size_problem(width, height, fps)
                or ic_lora_problem(ic_lora, links) or True)

    def dub(self, model: ModelHandle, upsampler: LatentUpsampler, positive: Conditioning, clip: torch.Tensor,
            audio: dict | None, fps: float, ic_lora: str, width: int, height: int, seed: int, strength: float,
            images: tuple[ImageCondition, ...] = (), unique_id: str | None = None):
        if problem := size_problem(width, height, fps) or ic_lora_problem(ic_lora):
            raise ValueError(problem)
        if audio is None:
            raise ValueError(f"audio: {NO_AUDIO}")
        path = bridge.model_path("loras", ic_lora)
        dub = Dub(VideoFrames(clip, float(fps)), float(strength), lora_reference_scale(path), comfy_sound(audio))
        frames = dub.info().frames
        if frames < MIN_FRAMES:
            raise ValueError(f"clip: Dub-It needs at least {MIN_FRAMES} frames; the clip has {clip.shape[0]}: give "
                             "a longer clip")
        request = Request(PROMPT, None, width, height, frames, float(fps), None, seed, "distilled",
                          images=at_frames(images, frames), dub=dub)
        try:
            request.check()  # the frames, the sound against the clip: now, before the model is touched
        except SettingError as exc:
            raise ValueError(f"{'audio' if exc.setting == 'sound' else exc.setting}: {exc}") from None
        model = model.check_loaded()
        job = request_job(request, model.config, model.host.tiling())
        if problem := model.host.memory_problem(job, model.decoders, upsampler):
            raise MemoryPlanError(problem)
        from ltx2_core import load_lora

        models = Models(model.host.transformer, None, model.decoders, upsampler, None, model.video_encoder,
                        model.checked_audio_encoder(), ((load_lora(path), 1.0),))
        check_request(request, models, model.config)
        previews = StagePreviews(rgb_projection(model.decoders.video), frames, height, width) if bridge.IN_COMFYUI \
            else None
        with model.host.sampler(model.loras, previews=previews, should_stop=bridge.interrupt_requested) as \
                (sampler, ready), bridge.interrupts():
            latent, generator = sample_request(request, models, positive.positive, None,
                                               StageBars(unique_id, ready), sampler=sampler)
            result = decode(latent, model.decoders, model.host.tiling(),
                            generator=generator_on(generator, seed, model.decoders),
                            video_decode=model.host.video_decode)
        return comfy_outputs(result)


def size_problem(width: int | None, height: int | None, fps: float | None) -> str | None:
    """Why width, height or fps cannot run Dub-It's two stages (multiples of 64); None when fine or linked."""
    return setting_problem(lambda: check_settings("distilled", width, height, 9, fps, unknown=frozenset(
        name for name, value in (("width", width), ("height", height), ("fps", fps)) if value is None)))
