"""The whole pipeline in one node (one-stage, two-stage, distilled), for users without a graph and for API users."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

import numpy as np

from ltx2_core import DEFAULT_NEGATIVE_PROMPT, MODES, Models, PromptEncoder, Request, generate, load_lora
from ltx2_core.conditioning.audio import AudioCondition
from ltx2_core.conditioning.images import ImageCondition
from ltx2_core.conditioning.retake import Retake
from ltx2_core.loader.lora import LoraError, check_distilled_lora, split_ic_loras
from ltx2_core.memory.plan import MemoryPlanError
from ltx2_core.model.upsampler import LatentUpsampler
from ltx2_core.duration import AutoFrames, check_auto_frames, resolve_frames
from ltx2_core.pipeline import encode_request, request_job
from ltx2_core.preview import StagePreviews, rgb_projection
from ltx2_core.releases import RELEASED_STEPS
from ltx2_core.request import Given, check_settings, check_stage_models

from . import bridge
from .decode import comfy_outputs, decode_spread
from .duration import bounds_problem, seconds_inputs
from .handles import (AUDIO_CONDITION, GUIDES, MODEL, RETAKE, TEXT_ENCODER, UPSAMPLER, Guide, ModelHandle,
                      control_conditions)
from .images import IMAGES, at_frames
from .sampling import MAX_FRAMES, MAX_SEED
from .text import prompt_problem, text_problem
from .validation import file_problem, limits_problem, link_problem, setting_problem

NO_LORA = "none"
LENGTHS = ("frames", "auto")  # the clip's length: the frames input, or predicted by LTX-2.5's duration head


class LTX2Generate:
    DESCRIPTION = ("Text to video + audio in one node: prompts, sampling (and x2 refinement), decoding, with the "
                   "release's guidance and steps. With audio_only on: text to audio, the sound alone. Two-stage with "
                   "images is Lightricks' TI2Vid two-stage pipeline; mode keyframes is their KeyframeInterpolation "
                   "pipeline (every image appended as a keyframe, frame 0 too, and the refinement's audio).")
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
                "mode": ([m for m in MODES if m not in ("hdr", "dfr")], {"default": "one-stage", "tooltip": "one-stage: full size with guidance; "
                         "two-stage: half size, x2 upsample, 3 refinement steps (upsampler + distilled LoRA; with "
                         "images: Lightricks' TI2Vid pipeline); distilled: a distilled checkpoint, 8 + 3 steps "
                         "(upsampler); two-stage-hq: two-stage with the res_2s sampler, 15 steps, the HQ guidance and "
                         "the distilled LoRA in both stages (0.25, 0.5); keyframes: two-stage interpolating between "
                         "two or more images, each appended at its frame, frame 0 too (Lightricks' "
                         "KeyframeInterpolation pipeline)"}),
                "width": ("INT", {"default": 768, "min": 32, "max": 8192, "step": 32, "tooltip": "pixels, a multiple "
                                  "of 32 (64 for two-stage and distilled)"}),
                "height": ("INT", {"default": 512, "min": 32, "max": 8192, "step": 32, "tooltip": "pixels, a "
                                   "multiple of 32 (64 for two-stage and distilled)"}),
                "frames": ("INT", {"default": 121, "min": 1, "max": MAX_FRAMES, "step": 8, "tooltip": "pixel frames, 8k+1"}),
                "fps": ("FLOAT", {"default": 24.0, "min": 1.0, "max": 120.0, "step": 0.01, "tooltip": "frame rate"}),
                "seed": ("INT", {"default": 0, "min": 0, "max": MAX_SEED, "control_after_generate": True,
                                 "tooltip": "the noise seed"}),
                "steps": ("INT", {"default": 0, "min": 0, "max": 200, "tooltip": "stage-1 steps; 0: the release's "
                                  f"({RELEASED_STEPS})"}),
            },
            "optional": {
                "upsampler": (UPSAMPLER, {"tooltip": "the x2 latent upsampler (two-stage and distilled)"}),
                "distilled_lora": ([NO_LORA] + bridge.file_options("loras"), {
                    "default": NO_LORA, "tooltip": "ltx-2-*-distilled-lora-384.safetensors of the model's release "
                                                   "for the two-stage refinement (models/loras; two-stage only). An "
                                                   "IC-LoRA is refused; one made for LTX-2.0 on a 2.3 / 2.5 model "
                                                   "(no attention gates) is warned of in the log"}),
                "images": (IMAGES, {"tooltip": "images held at frames (LTX-2 Image Condition): image-to-video, "
                                    "last frame, keyframes"}),
                "audio": (AUDIO_CONDITION, {"tooltip": "a sound to generate the video to (LTX-2 Audio Condition), "
                                            "held in every stage; at strength 1 the output carries it unchanged"}),
                "audio_only": ("BOOLEAN", {"default": False, "tooltip": "text to audio: the sound of frames / fps "
                               "seconds alone (one-stage, one GPU; width and height unused); the images output is "
                               "then empty: wire the audio into Save Audio"}),
                "guides": (GUIDES, {"tooltip": "control videos (LTX-2 Video Guide) steering stage 1 through the "
                                    "IC-LoRA the model carries (LTX-2 LoRA Loader), as the reference"}),
                "retake": (RETAKE, {"tooltip": "regenerate a span of a clip (LTX-2 Retake): the clip's size, "
                                    "frames and fps are used (width, height, frames and fps here are ignored); one "
                                    "stage: mode one-stage or distilled"}),
                "enhance_prompt": ("BOOLEAN", {"default": False, "tooltip": "rewrite the prompt with the loaded "
                                   "Gemma first (Lightricks' prompt enhancement, seeded by seed; needs an installed "
                                   "ltx-core for its system prompt: pip install --no-deps ltx-core==1.0.0)"}),
                "sampler": (list(GENERATE_SAMPLERS), {"default": "auto", "tooltip": "auto: the mode's (res_2s for "
                            "two-stage-hq, euler otherwise); euler; res_2s: second order, two predictions per step "
                            "(not with distilled)"}),
                "length": (list(LENGTHS), {"default": "frames", "tooltip": "frames: the frames input; auto: the "
                           "length LTX-2.5's duration head predicts from the prompt (text to audio too), within "
                           "min_seconds..max_seconds (the model's files must carry the head)"}),
                **seconds_inputs(),
            },
            "hidden": {"unique_id": "UNIQUE_ID"},
        }

    @classmethod
    def VALIDATE_INPUTS(cls, prompt: str | None = None, negative_prompt: str | None = None, mode: str | None = None,
                        width: int | None = None, height: int | None = None, frames: int | None = None,
                        fps: float | None = None, steps: int | None = None, distilled_lora: str | None = NO_LORA,
                        audio_only: bool | None = False, sampler: str | None = "auto", length: str | None = "frames",
                        min_seconds: float | None = 1.0, max_seconds: float | None = 20.0,
                        input_types: dict | None = None):
        """Everything that needs no file's content, when queued: the stated limits (NaN too), the prompts, the mode's
        sizes and steps and the models it needs, what a retake or text to audio allows (input_types: which inputs are
        linked), the distilled LoRA's kind. Known only when the node runs: image frames, the clip of a retake."""
        links = input_types  # None: called without ComfyUI, a None value then counts as linked
        values = dict(prompt=prompt, negative_prompt=negative_prompt, mode=mode, width=width, height=height,
                      frames=frames, fps=fps, steps=steps, audio_only=audio_only, min_seconds=min_seconds,
                      max_seconds=max_seconds)  # distilled_lora: a file
        return (limits_problem(cls, values, links) or link_problem(cls, links) or prompt_problem(prompt)
                or text_problem("negative_prompt", negative_prompt)
                or request_problem(mode, width, height, None if length == "auto" else frames, fps, steps, audio_only,
                                   distilled_lora, links, sampler)  # auto: the frames input is not used
                or distilled_lora_problem(distilled_lora, links) or bounds_problem(min_seconds, max_seconds) or True)

    def generate(self, model: ModelHandle, text_encoder: PromptEncoder, prompt: str, negative_prompt: str,
                 mode: str, width: int, height: int, frames: int, fps: float, seed: int, steps: int,
                 upsampler: LatentUpsampler | None = None, distilled_lora: str = NO_LORA,
                 images: tuple[ImageCondition, ...] = (), audio: AudioCondition | None = None,
                 audio_only: bool = False, guides: tuple[Guide, ...] = (), retake: Retake | None = None,
                 unique_id: str | None = None, enhance_prompt: bool = False, sampler: str = "auto",
                 length: str = "frames", min_seconds: float = 1.0, max_seconds: float = 20.0):
        linked = given_inputs(images=images, audio=audio, guides=guides, retake=retake, upsampler=upsampler)
        if retake is not None:  # the clip is the retaken one
            info = retake.info()
            width, height, frames, fps = info.width, info.height, info.frames, info.fps
        auto = auto_length(length, min_seconds, max_seconds)
        checked = _check_request(prompt, negative_prompt, mode, width, height, None if auto else frames, fps, steps,
                                 distilled_lora, images, linked, audio_only, sampler)
        frames = 121 if auto else frames  # auto: a placeholder until the head predicts the length
        request = Request(prompt, negative_prompt or None, width, height, frames, fps, steps or None, seed, mode,
                          images=checked, audio=audio, audio_only=bool(audio_only),
                          controls=control_conditions(guides, model, fps), retake=retake, auto_frames=auto,
                          enhance_prompt=bool(enhance_prompt), sampler=None if sampler == "auto" else sampler)
        if audio_only or guides or retake is not None or enhance_prompt or auto is not None:
            request.check()  # text to audio, controls, a retake, enhancement, auto: refused here, before the model
        if audio is not None:
            audio.check(frames / fps)  # a sound shorter than the clip, too
        model = model.check_loaded()
        prompts = None
        if auto is not None:  # the length first: the memory check and the previews are for the clip chosen
            check_auto_frames(request, model.duration_head is not None, model.config.version.value)
            prompts = encode_request(request, text_encoder, model.config)
            request = resolve_frames(request, model.duration_head, prompts[0])
            frames = request.frames  # the choice is logged with the head's seconds (ltx2_core.duration)
        held_sound = audio is not None or (retake is not None and retake.sound is not None)
        audio_encoder = model.checked_audio_encoder() if held_sound else None
        job = request_job(request, model.config, model.host.tiling())
        if problem := model.host.memory_problem(job, model.decoders, upsampler):
            raise MemoryPlanError(problem)
        lora = None if distilled_lora == NO_LORA else load_lora(bridge.model_path("loras", distilled_lora))
        # sampled by the host's sampler; the transformer (None on workers) only checks the distilled LoRA's shapes
        every_stage, ic_loras = split_ic_loras(model.loras, bool(guides))  # stage 1 only, as the reference
        models = Models(model.host.transformer, text_encoder, model.decoders, upsampler, lora, model.video_encoder,
                        audio_encoder, ic_loras)
        previews = (StagePreviews(rgb_projection(model.decoders.video), frames, height, width)
                    if bridge.IN_COMFYUI and not audio_only else None)
        with model.host.sampler(every_stage, previews=previews, should_stop=bridge.interrupt_requested) as \
                (stage_sampler, ready), bridge.interrupts():
            return comfy_outputs(generate(request, models, StageBars(unique_id, ready), sampler=stage_sampler,
                                          tiling=model.host.tiling(), prompts=prompts,
                                          distribution=decode_spread(model)))


class StageBars:
    """A generation's progress as one ComfyUI progress bar per stage (with the newest preview from `ready`)."""

    def __init__(self, unique_id: str | None, ready: Callable[[], np.ndarray | None] | None) -> None:
        self.unique_id, self.ready, self.bars = unique_id, ready, {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        bar = self.bars.setdefault(stage, bridge.progress_bar(total, self.unique_id, self.ready))
        if bar is not None:
            bar(done, total)


class ProgressSampler:
    """A host's sampler (`pipeline.StageSampler`) with a progress bar per call, named `name(call number from 1, the
    call's Stage)`: for the chains that call it more than once per stage (tiles, rounds)."""

    def __init__(self, sampler, bars: StageBars, name: Callable[[int, object], str]) -> None:
        self.sampler, self.config, self.device = sampler, sampler.config, sampler.device
        self.model = getattr(sampler, "model", None)
        self.bars, self.name, self.calls = bars, name, 0

    def __call__(self, positive, negative, latent, stage, generator, *args, **kwargs):
        self.calls += 1
        label = self.name(self.calls, stage)
        return self.sampler(positive, negative, latent, stage, generator, *args,
                            progress=lambda done, total: self.bars(label, done, total))


# the generate nodes' inputs that are conditions of the request (ltx2_core's `Given`: input -> its field), and
# ltx2_core's settings these nodes call otherwise
GENERATE_SAMPLERS = ("auto", "euler", "res_2s")  # auto: the mode's (`Request.stage_sampler`)
CONDITION_INPUTS = {"images": "images", "audio": "audio", "guides": "controls", "retake": "retake"}
SETTING_INPUTS = {"controls": "guides", "prompts": "window_prompts"}


def request_problem(mode: str | None, width: int | None, height: int | None, frames: int | None, fps: float | None,
                    steps: int | None, audio_only: bool | None, distilled_lora: str | None,
                    linked: Collection[str] | None, sampler: str | None = "auto") -> str | None:
    """Why the generate nodes' settings cannot run with the inputs `linked` (the names of those given), by
    ltx2_core's own model-free checks (`check_settings`, `check_stage_models`); None when they can. None is a value
    not known yet (linked), and a retake's clip sets width, height, frames and fps when the node runs."""
    linked = linked or ()
    given = Given(**{field: name in linked for name, field in CONDITION_INPUTS.items()})
    unknown = {name for name, value in (("mode", mode), ("width", width), ("height", height), ("frames", frames),
                                        ("fps", fps), ("steps", steps)) if value is None}
    if given.retake:
        unknown |= {"width", "height", "frames", "fps"}
    if audio_only is None:
        unknown |= {"width", "height"}

    def check() -> None:
        check_settings(mode, width, height, frames, fps, steps or None, audio_only=bool(audio_only), given=given,
                       unknown=frozenset(unknown), sampler=None if sampler in ("auto", None) else sampler)
        if mode is not None and distilled_lora is not None:
            check_stage_models(mode, upsampler="upsampler" in linked, distilled_lora=distilled_lora != NO_LORA,
                               one_stage_input=given.retake)
    return setting_problem(check, SETTING_INPUTS)


def distilled_lora_problem(name: str | None, links: Mapping[str, object] | None = None) -> str | None:
    """Why the file picked as the distilled LoRA cannot refine stage 2 (not a LoRA of models/loras, an IC-LoRA);
    None when fine, unused ("none") or linked. Headers only."""
    if name == NO_LORA or (name is None and (links is None or "distilled_lora" in links)):
        return None
    if name is None or (problem := file_problem("LoRA", name)):
        return ("distilled_lora: null is no value of it; pick a LoRA from models/loras or none" if name is None
                else problem.replace("lora_name", "distilled_lora", 1))
    try:
        check_distilled_lora(bridge.model_path("loras", name))
    except LoraError as exc:
        return f"distilled_lora: {exc}"
    return None


def _check_request(prompt: str, negative_prompt: str, mode: str, width: int, height: int, frames: int | None,
                   fps: float, steps: int, distilled_lora: str, images: tuple[ImageCondition, ...],
                   linked: Collection[str], audio_only: bool = False, sampler: str = "auto"
                   ) -> tuple[ImageCondition, ...]:
    """First thing when the node runs, before any model work, the queue-time checks again (an API caller may skip
    none of them: ValueError naming the fix), then the images resolved for the clip. `linked`: the names of the
    condition and model inputs given (a retake's clip: its size, frames and fps are the values here); `frames`
    None: not known yet (an automatic length)."""
    if problem := (prompt_problem(prompt) or text_problem("negative_prompt", negative_prompt)
                   or request_problem(mode, width, height, frames, fps, steps, audio_only, distilled_lora, linked,
                                      sampler)
                   or distilled_lora_problem(distilled_lora)):
        raise ValueError(problem)
    return images if frames is None else at_frames(images, frames)  # None: an automatic length, placed later


def auto_length(length: str, min_seconds: float, max_seconds: float) -> AutoFrames | None:
    """The `length` input: "auto" -> the bounds of the predicted length; "frames" -> None (the frames input)."""
    if length not in LENGTHS:
        raise ValueError(f"length must be one of {', '.join(LENGTHS)}, got {length!r}")
    return AutoFrames(float(min_seconds), float(max_seconds)) if length == "auto" else None


def given_inputs(**inputs: object) -> set[str]:
    """The names of the inputs given (a link's value: not None, not empty)."""
    return {name for name, value in inputs.items() if value is not None and value != ()}
