"""A long clip in one node: DFR (ltx-pipelines 1.2.0's `DFRPipeline`, `ltx2_core.dfr_pipeline`): keyframe slots,
spatial detailing with the x2 detailing IC-LoRA, and temporal x2 rounds with the temporal upsampler."""

from __future__ import annotations

from ltx2_core import Models, Request, load_lora
from ltx2_core.conditioning.images import ImageCondition
from ltx2_core.dfr import DFR, MAX_ROUNDS, check_dfr
from ltx2_core.dfr_pipeline import check_dfr_models, generate_dfr
from ltx2_core.loader.lora import split_ic_loras
from ltx2_core.memory.plan import MemoryPlanError
from ltx2_core.model.upsampler import LatentUpsampler
from ltx2_core.pipeline import request_job
from ltx2_core.request import check_settings

from . import bridge
from .decode import comfy_outputs
from .generate import NO_LORA, ProgressSampler, StageBars, distilled_lora_problem
from .handles import CONDITIONING, MODEL, UPSAMPLER, Conditioning, ModelHandle
from .images import IMAGES, at_frames
from .sampling import MAX_FRAMES, MAX_SEED
from .validation import file_problem, limits_problem, link_problem, setting_problem

PROMPT = "the prompt of the linked conditioning"  # Request needs one; the node samples the encoded conditioning
NO_TEMPORAL = ("temporal_rounds {rounds} need DFR's temporal x2 latent upsampler: connect an LTX-2 Latent Upsampler "
               "Loader holding the temporal file to temporal_upsampler, or set temporal_rounds to 0")


class LTX2DFR:
    DESCRIPTION = ("A long clip as Lightricks' DFR pipeline: a keyframe-slot LTX-2.5 transformer makes the clip at "
                   "half size with generated keyframes at its segment ends, stage 2 details it at full size (with "
                   "the x2 detailing IC-LoRA where given), and each temporal round doubles the frames and the frame "
                   "rate with the temporal upsampler, refined in tiles over the seams. The distilled LoRA runs in "
                   "every stage, no guidance. Outputs (frames - 1) * 2^rounds + 1 frames at fps * 2^rounds and the "
                   "sound of stage 1.")
    CATEGORY = "LTX-2/generate"
    RETURN_TYPES = ("IMAGE", "AUDIO", "FLOAT")
    RETURN_NAMES = ("images", "audio", "fps")
    OUTPUT_TOOLTIPS = ("the clip's frames", "stage 1's sound, cut to the clip", "the output frame rate "
                       "(fps * 2^temporal_rounds)")
    FUNCTION = "generate"

    @classmethod
    def INPUT_TYPES(cls):
        loras = bridge.file_options("loras")
        return {"required": {
            "model": (MODEL, {"tooltip": "the keyframe-slot LTX-2.5 transformer (its config sets "
                              "use_keyframes_abs_pos_embedding) with its VAE files"}),
            "conditioning": (CONDITIONING, {"tooltip": "the encoded prompt (LTX-2 Text Encode; the positive is "
                                            "used: DFR runs no guidance)"}),
            "upsampler": (UPSAMPLER, {"tooltip": "the x2 spatial latent upsampler (stage 2)"}),
            "distilled_lora": (loras, {"tooltip": "ltx-2.5-22b-distilled-lora-*.safetensors, fused in every stage "
                                       "(models/loras)"}),
            "width": ("INT", {"default": 768, "min": 64, "max": 8192, "step": 64, "tooltip": "pixels, a multiple "
                              "of 64"}),
            "height": ("INT", {"default": 512, "min": 64, "max": 8192, "step": 64, "tooltip": "pixels, a multiple "
                               "of 64"}),
            "frames": ("INT", {"default": 121, "min": 9, "max": MAX_FRAMES, "step": 8, "tooltip": "pixel frames "
                               "before the temporal rounds, 8k+1 (k >= 1); LTX-2 Predict Length can give them"}),
            "fps": ("FLOAT", {"default": 24.0, "min": 1.0, "max": 120.0, "step": 0.01, "tooltip": "the frame rate "
                              "before the temporal rounds"}),
            "seed": ("INT", {"default": 0, "min": 0, "max": MAX_SEED, "control_after_generate": True,
                             "tooltip": "the noise seed (round r's tile i draws seed + 1000 r + i)"}),
            "temporal_rounds": ("INT", {"default": 0, "min": 0, "max": MAX_ROUNDS, "tooltip": "temporal x2 rounds: "
                                        "each doubles the frames and the frame rate (needs temporal_upsampler)"}),
        }, "optional": {
            "images": (IMAGES, {"tooltip": "images held at frames (LTX-2 Image Condition), in every stage and the "
                                "rounds' tiles that hold their frame"}),
            "temporal_upsampler": (UPSAMPLER, {"tooltip": "DFR's temporal x2 latent upsampler (LTX-2 Latent "
                                               "Upsampler Loader with the temporal file), for temporal_rounds > 0"}),
            "detailing_lora": ([NO_LORA] + loras, {"default": NO_LORA, "tooltip": "stage 2's x2 detailing IC-LoRA "
                               "(its metadata's reference_downscale_factor, else 2); none: stage 2 without it"}),
            "detailing_strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 2.0, "step": 0.01,
                                             "tooltip": "the detailing IC-LoRA's strength"}),
        }, "hidden": {"unique_id": "UNIQUE_ID"}}

    @classmethod
    def VALIDATE_INPUTS(cls, width: int | None = None, height: int | None = None, frames: int | None = None,
                        fps: float | None = None, temporal_rounds: int | None = None,
                        distilled_lora: str | None = None, detailing_lora: str | None = NO_LORA,
                        detailing_strength: float | None = 1.0, input_types: dict | None = None):
        """Everything that needs no model: the limits (NaN too), the size and frames DFR lays out, the rounds
        against the temporal upsampler's link, the LoRA files (headers)."""
        links = input_types  # None: called without ComfyUI, a None value then counts as linked
        values = dict(width=width, height=height, frames=frames, fps=fps, temporal_rounds=temporal_rounds,
                      detailing_strength=detailing_strength)
        return (limits_problem(cls, values, links) or link_problem(cls, links)
                or settings_problem(width, height, frames, fps)
                or rounds_problem(temporal_rounds, None if links is None else "temporal_upsampler" in links)
                or distilled_lora_problem(distilled_lora, links) or detailing_problem(detailing_lora, links) or True)

    def generate(self, model: ModelHandle, conditioning: Conditioning, upsampler: LatentUpsampler,
                 distilled_lora: str, width: int, height: int, frames: int, fps: float, seed: int,
                 temporal_rounds: int, images: tuple[ImageCondition, ...] = (),
                 temporal_upsampler: LatentUpsampler | None = None, detailing_lora: str = NO_LORA,
                 detailing_strength: float = 1.0, unique_id: str | None = None):
        if problem := (settings_problem(width, height, frames, fps)
                       or rounds_problem(temporal_rounds, temporal_upsampler is not None)
                       or distilled_lora_problem(distilled_lora) or detailing_problem(detailing_lora)):
            raise ValueError(problem)
        detailing = None if detailing_lora == NO_LORA else bridge.model_path("loras", detailing_lora)
        request = Request(PROMPT, None, width, height, frames, float(fps), None, seed, "dfr",
                          images=at_frames(images, frames),
                          dfr=DFR(int(temporal_rounds), detailing, float(detailing_strength)))
        request.check()  # the images' frames too: before the model is touched
        model = model.check_loaded()
        check_dfr(frames, request.dfr.rounds, model.config, "the model", "linked" if temporal_upsampler else None)
        every_stage, ic_loras = split_ic_loras(model.loras)
        if ic_loras:
            raise ValueError("DFR's only IC-LoRA is the detailing one: pick it in detailing_lora and take it off the "
                             "LTX-2 LoRA Loader")
        models = Models(model.host.transformer, None, model.decoders, upsampler,
                        load_lora(bridge.model_path("loras", distilled_lora)), model.video_encoder,
                        duration_head=model.duration_head, temporal_upsampler=temporal_upsampler)
        check_dfr_models(request, models, model.config)  # one process, the upsamplers' directions
        job = request_job(request, model.config, model.host.tiling())
        if problem := model.host.memory_problem(job, model.decoders, upsampler):
            raise MemoryPlanError(problem)
        with model.host.sampler(every_stage, should_stop=bridge.interrupt_requested) as (sampler, ready), \
                bridge.interrupts():
            bars = ProgressSampler(sampler, StageBars(unique_id, ready), lambda call, stage: stage.name)
            result = generate_dfr(request, models, sampler=bars, tiling=model.host.tiling(),
                                  positive=conditioning.positive, video_decode=model.host.video_decode)
        return comfy_outputs(result)


def settings_problem(width: int | None, height: int | None, frames: int | None, fps: float | None) -> str | None:
    """Why the size, frames or rate cannot run DFR (ltx2_core's model-free checks); None when fine or linked."""
    unknown = frozenset(name for name, value in (("width", width), ("height", height), ("frames", frames),
                                                  ("fps", fps)) if value is None)
    return setting_problem(lambda: check_settings("dfr", width, height, frames, fps, unknown=unknown))


def rounds_problem(rounds: int | None, temporal_linked: bool | None) -> str | None:
    """Why `rounds` cannot run: over the most, or rounds without the temporal upsampler (None: not known yet)."""
    if rounds is None:
        return None
    if not 0 <= rounds <= MAX_ROUNDS:
        return f"temporal_rounds must be 0..{MAX_ROUNDS}, got {rounds}"
    if rounds and temporal_linked is False:
        return NO_TEMPORAL.format(rounds=rounds)
    return None


def detailing_problem(name: str | None, links: dict | None = None) -> str | None:
    """Why the file picked as the detailing IC-LoRA cannot be read; None when fine, none or linked. Headers only."""
    if name == NO_LORA or (name is None and (links is None or "detailing_lora" in links)):
        return None
    if problem := file_problem("LoRA", name):
        return problem.replace("lora_name", "detailing_lora", 1)
    return None

