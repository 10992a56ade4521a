"""Latent, guidance and sampler nodes."""

from __future__ import annotations

import math

import torch

from ltx2_core import GuidanceParams
from ltx2_core.compile import GRAPH_CHOICES, graph_setting
from ltx2_core.conditioning.audio import AudioCondition, encode_audio_condition
from ltx2_core.conditioning.control import encode_control
from ltx2_core.conditioning.images import ImageCondition
from ltx2_core.conditioning.keyframes import appended_image_tokens, encode_images
from ltx2_core.geometry import video_tokens
from ltx2_core.memory.footprint import Job
from ltx2_core.memory.plan import MemoryPlanError
from ltx2_core.memory.request_check import request_problem
from ltx2_core.preview import LatentPreview, rgb_projection
from ltx2_core.releases import DEFAULT_VERSION, RELEASED_STEPS, RELEASES
from ltx2_core.request import check_settings
from ltx2_core.sampling.cache import CacheSettings
from ltx2_core.sampling.stage import SAMPLERS, check_sampler
from ltx2_core.sampling.guidance import active_passes, default_guidance
from ltx2_core.sampling.recipe import SCHEDULES, StageParts, build_stage, guided
from ltx2_core.stages import empty_latent

from . import bridge
from .handles import (AUDIO_CONDITION, CONDITIONING, GUIDANCE, GUIDES, LATENT, MODEL, Conditioning, Guide,
                      ModelHandle, control_conditions)
from .images import IMAGES, at_frames
from .interop import from_comfy, guided_audio, mark_guided, mask_conditions, to_comfy
from .step_cache import STEP_CACHE
from .validation import limits_problem, setting_problem, stated_limits

CATEGORY = "LTX-2/sampling"
MAX_SEED = 2**63 - 1
MAX_FRAMES = 1441  # pixel frames a clip may have (the frames inputs' limit)


MAX_SIGMAS = 201  # explicit sigmas: as many steps as the steps input allows (200)
MAX_STG_BLOCKS = 64


def check_size(width: int, height: int, multiple: int = 32, why: str = "") -> None:
    """ValueError naming the fix unless width and height are positive multiples of `multiple` (pixels)."""
    if width % multiple or height % multiple or min(width, height) <= 0:
        raise ValueError(f"width x height {width}x{height}: both must be multiples of {multiple}{why}; e.g. "
                         f"{width // multiple * multiple or multiple}x{height // multiple * multiple or multiple}")


class LTX2EmptyLatent:
    DESCRIPTION = "An empty video + audio latent of the clip's size, length and frame rate."
    CATEGORY = CATEGORY
    RETURN_TYPES = (LATENT,)
    RETURN_NAMES = ("latent",)
    FUNCTION = "make"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "width": ("INT", {"default": 768, "min": 32, "max": 8192, "step": 32,
                              "tooltip": "pixels, a multiple of 32 (64 for the two-stage pipelines' first stage)"}),
            "height": ("INT", {"default": 512, "min": 32, "max": 8192, "step": 32,
                               "tooltip": "pixels, a multiple of 32"}),
            "frames": ("INT", {"default": 121, "min": 1, "max": MAX_FRAMES, "step": 8,
                               "tooltip": "pixel frames, 8k+1 (121 = 5 s at 24 fps)"}),
            "fps": ("FLOAT", {"default": 24.0, "min": 1.0, "max": 120.0, "step": 0.01,
                              "tooltip": "frame rate; also sets the audio length"}),
        }}

    @classmethod
    def VALIDATE_INPUTS(cls, width: int | None = None, height: int | None = None, frames: int | None = None,
                        fps: float | None = None):
        """The clip's size when queued, by ltx2_core's rule (`check_settings`): frames 8k+1, width and height
        multiples of 32 (an API caller's too; the UI steps by 32), a finite rate."""
        values = dict(width=width, height=height, frames=frames, fps=fps)
        unknown = frozenset({"mode"} | {name for name, value in values.items() if value is None})
        return (limits_problem(cls, values)
                or setting_problem(lambda: check_settings(None, width, height, frames, fps, unknown=unknown))
                or True)

    def make(self, width: int, height: int, frames: int, fps: float = 24.0):
        check_size(width, height)
        if problem := request_problem(Job(frames, height, width, fps, ("latent",))):
            raise MemoryPlanError(problem)
        return (to_comfy(empty_latent(width, height, frames, fps)),)


def _blocks(text: str, default: tuple[int, ...], name: str = "stg_blocks") -> tuple[int, ...]:
    if text.strip().lower() in ("", "auto"):
        return default
    try:
        blocks = tuple(int(block) for block in text.split(",") if block.strip())
    except ValueError:
        blocks = ()
    if not blocks or len(blocks) > MAX_STG_BLOCKS or min(blocks) < 0:
        raise ValueError(f"{name}: 'auto' or comma-separated block numbers such as 28,29; got {text[:60]!r}")
    return blocks


class LTX2Guidance:
    DESCRIPTION = "Multimodal guidance per modality (CFG, STG, rescale, modality isolation); release values by default."
    CATEGORY = CATEGORY
    RETURN_TYPES = (GUIDANCE,)
    RETURN_NAMES = ("guidance",)
    FUNCTION = "make"

    @classmethod
    def INPUT_TYPES(cls):
        video, audio = default_guidance(DEFAULT_VERSION)
        required = {"model": (MODEL, {"tooltip": "the model (its version sets the STG blocks of 'auto')"})}
        for prefix, values, what in (("", video, "video"), ("audio_", audio, "audio")):
            required |= {
                f"{prefix}cfg": ("FLOAT", {"default": values.cfg, "min": 0.0, "max": 30.0, "step": 0.1,
                                           "tooltip": f"{what} classifier-free guidance; 1 switches it off"}),
                f"{prefix}stg": ("FLOAT", {"default": values.stg, "min": 0.0, "max": 10.0, "step": 0.1,
                                           "tooltip": f"{what} spatio-temporal guidance; 0 switches it off"}),
                f"{prefix}rescale": ("FLOAT", {"default": values.rescale, "min": 0.0, "max": 1.0, "step": 0.05,
                                               "tooltip": f"{what} rescale of the guided prediction (0..1)"}),
                f"{prefix}modality": ("FLOAT", {"default": values.modality, "min": 0.0, "max": 30.0, "step": 0.1,
                                                "tooltip": f"{what} modality-isolation guidance; 1 switches it off"}),
                f"{prefix}stg_blocks": ("STRING", {"default": "auto", "tooltip": f"{what} STG blocks, e.g. 29 or "
                                                   "28,29; auto: the release's"}),
            }
        return {"required": required}

    @classmethod
    def VALIDATE_INPUTS(cls, stg_blocks: str | None = None, audio_stg_blocks: str | None = None,
                        cfg: float | None = None, stg: float | None = None, rescale: float | None = None,
                        modality: float | None = None, audio_cfg: float | None = None, audio_stg: float | None = None,
                        audio_rescale: float | None = None, audio_modality: float | None = None):
        """The blocks' syntax when queued (their range needs the model: checked when the node runs), and the scales'
        limits, NaN too (ComfyUI's own range check lets NaN pass)."""
        scales = dict(cfg=cfg, stg=stg, rescale=rescale, modality=modality, audio_cfg=audio_cfg, audio_stg=audio_stg,
                      audio_rescale=audio_rescale, audio_modality=audio_modality)
        if problem := limits_problem(cls, scales):
            return problem
        for name, text in (("stg_blocks", stg_blocks), ("audio_stg_blocks", audio_stg_blocks)):
            if problem := stated_limits(cls, name, text):
                return problem
            if text is not None:
                try:
                    _blocks(text, (), name)
                except ValueError as exc:
                    return str(exc)
        return True

    def make(self, model: ModelHandle, **scales):
        defaults = default_guidance(model.config.version, model.config.num_layers)
        params = []
        for prefix, default in zip(("", "audio_"), defaults):
            blocks = _blocks(scales[f"{prefix}stg_blocks"], default.stg_blocks, f"{prefix}stg_blocks")
            if any(not 0 <= b < model.config.num_layers for b in blocks):
                raise ValueError(f"{prefix}stg_blocks {list(blocks)} are outside this model's blocks "
                                 f"0..{model.config.num_layers - 1}")
            params.append(GuidanceParams(cfg=scales[f"{prefix}cfg"], stg=scales[f"{prefix}stg"], stg_blocks=blocks,
                                         rescale=scales[f"{prefix}rescale"], modality=scales[f"{prefix}modality"]))
        return (tuple(params),)


def check_node_sampler(sampler: str, schedule: str, cache: CacheSettings | None, cuda_graphs: str | bool) -> None:
    """ValueError naming the fix for a sampler the stage cannot take: res_2s on the distilled table (its reference
    steps it with euler), with the step cache, or with cuda_graphs on (its steps run eagerly)."""
    check_sampler(sampler, cache=cache is not None)
    if sampler == "res_2s" and schedule == "distilled":
        raise ValueError("sampler res_2s: the distilled table is stepped with euler (LTX-2.5: ancestral), as its "
                         "reference; set sampler to euler, or use the ltx2 or stage-2 refine schedule")
    if sampler == "res_2s" and graph_setting(cuda_graphs) is True:
        raise ValueError("sampler res_2s: its steps are not captured as CUDA graphs; set cuda_graphs to auto "
                         "(eager res_2s steps) or off")


def parse_sigmas(text: str) -> tuple[float, ...]:
    """Explicit sigmas: finite, strictly falling from at most 1 to 0, at most MAX_SIGMAS (ValueError naming the fix)."""
    try:
        values = tuple(float(v) for v in text.replace(" ", "").split(",") if v)
    except ValueError:
        raise ValueError(f"sigmas: comma-separated numbers such as 1.0, 0.5, 0.0; got {text[:60]!r}")
    if len(values) > MAX_SIGMAS:
        raise ValueError(f"sigmas: {len(values)} values, at most {MAX_SIGMAS} ({MAX_SIGMAS - 1} steps)")
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"sigmas: every value must be a finite number; got {text[:60]!r}")
    if len(values) < 2 or values[-1] != 0 or any(a <= b for a, b in zip(values, values[1:])) or values[0] > 1:
        raise ValueError(f"sigmas must fall strictly from at most 1 to 0 (e.g. 1.0, 0.5, 0.0); got {text[:60]!r}")
    return values


class LTX2Sampler:
    DESCRIPTION = "Samples video + audio with every guidance pass batched in one forward and no host sync per step."
    CATEGORY = CATEGORY
    RETURN_TYPES = (LATENT,)
    RETURN_NAMES = ("latent",)
    FUNCTION = "sample"

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "model": (MODEL, {"tooltip": "the LTX-2 model (with its LoRAs)"}),
                "conditioning": (CONDITIONING, {"tooltip": "the encoded prompts"}),
                "latent": (LATENT, {"tooltip": "an empty latent, or an upsampled one to refine; ours or ComfyUI's "
                                   "native LTX-2 audio + video latent (LTXVConcatAVLatent)"}),
                "seed": ("INT", {"default": 0, "min": 0, "max": MAX_SEED, "control_after_generate": True,
                                 "tooltip": "the noise seed"}),
                "steps": ("INT", {"default": 30, "min": 1, "max": 200, "tooltip": "steps of the ltx2 schedule "
                                  f"({RELEASED_STEPS} in the releases); the fixed tables ignore it"}),
                "schedule": (list(SCHEDULES), {"default": "ltx2", "tooltip": "ltx2: from noise; distilled: the "
                             "8-step table of distilled models (LTX-2.5: ancestral steps, fresh noise from seed + "
                             "10000, as its release pipeline, except with guides: plain Euler, as its IC-LoRA "
                             "pipeline); stage-2 refine: re-noise to 0.909375, 3 steps (LTX-2.5, after a guided "
                             "stage 1: the audio of the latent it is given is kept, as its two-stage pipeline)"}),
            },
            "optional": {
                "guidance": (GUIDANCE, {"tooltip": "without it: the plain conditional prediction (distilled, refine)"}),
                "sigmas": ("STRING", {"default": "", "tooltip": "explicit sigmas (e.g. 1.0, 0.7, 0.3, 0.0) "
                                      "overriding the schedule; the latent is noised to the first"}),
                "compile": ("BOOLEAN", {"default": False, "tooltip": "torch.compile every block (CUDA; the first "
                                        "run compiles)"}),
                "cuda_graphs": (list(GRAPH_CHOICES), {"default": "auto", "tooltip": "capture each step as a CUDA "
                                "graph: auto where it can (CUDA, every block resident, one GPU; the interrupt is then "
                                "read between steps), on (refused where it cannot), off"}),
                "images": (IMAGES, {"tooltip": "images held at frames (LTX-2 Image Condition): image-to-video, "
                                    "last frame, keyframes; encoded at this latent's size"}),
                "audio": (AUDIO_CONDITION, {"tooltip": "a sound to generate the video to (LTX-2 Audio Condition), "
                                            "held over the clip; at strength 1 the audio guidance is off (the "
                                            "sound is not sampled) and the latent carries the sound, which the "
                                            "decoder returns as it is. Wire it into every sampler of a chain"}),
                "guides": (GUIDES, {"tooltip": "control videos (LTX-2 Video Guide) steering this stage through the "
                                    "IC-LoRA the model carries, at this latent's size / the LoRA's "
                                    "reference_downscale_factor; as the reference, guide stage 1 of a two-stage "
                                    "chain only"}),
                "cache": (STEP_CACHE, {"tooltip": "step caching (LTX-2 Step Cache: ComfyUI's EasyCache decisions); "
                                       "without it every step runs the transformer"}),
                "sampler": (list(SAMPLERS), {"default": "euler", "tooltip": "euler (first order; ancestral on "
                            "LTX-2.5's distilled table); res_2s: the HQ pipeline's second-order SDE sampler, two "
                            "predictions per step (ltx2 and stage-2 refine schedules; not with the cache)"}),
            },
            "hidden": {"unique_id": "UNIQUE_ID"},
        }

    @classmethod
    def VALIDATE_INPUTS(cls, sigmas: str | None = None, cuda_graphs: str | bool | None = None):
        """sigmas (the one input ComfyUI cannot judge) and cuda_graphs (a workflow saved before it had "auto" holds
        a boolean: kept as on / off); the others keep ComfyUI's own checks."""
        if cuda_graphs is not None and not (isinstance(cuda_graphs, bool) or cuda_graphs in GRAPH_CHOICES):
            return f"cuda_graphs: one of {', '.join(GRAPH_CHOICES)} (a saved true / false: on / off), got {cuda_graphs!r}"
        if problem := stated_limits(cls, "sigmas", sigmas):
            return problem
        try:
            if sigmas is not None and sigmas.strip():
                parse_sigmas(sigmas)
        except ValueError as exc:
            return str(exc)
        return True

    def sample(self, model: ModelHandle, conditioning: Conditioning, latent: dict, seed: int, steps: int,
               schedule: str, guidance: tuple[GuidanceParams, GuidanceParams] | None = None, sigmas: str = "",
               compile: bool = False, cuda_graphs: str | bool = "auto", images: tuple[ImageCondition, ...] = (),
               audio: AudioCondition | None = None, guides: tuple[Guide, ...] = (), cache: CacheSettings | None = None,
               sampler: str = "euler", unique_id: str | None = None):
        check_node_sampler(sampler, schedule, cache, cuda_graphs)  # before any work
        given = latent  # ComfyUI's LATENT: ours or a native node's (nodes/interop.py)
        held = mask_conditions(given) if isinstance(given, dict) else []  # LTXVImgToVideo's frames
        latent = from_comfy(given)
        frames, height, width = latent.pixel_size
        images = at_frames(images, frames)  # first: a frame beyond the clip is refused before any work
        if audio is not None:
            audio.check(frames / latent.fps)  # a sound shorter than the clip, too
        controls = control_conditions(guides, model, latent.fps)  # no IC-LoRA, too few frames: refused now
        for control in controls:
            control.check(frames, ((height, width),))
        model = model.check_loaded()
        encoder = model.checked_audio_encoder() if audio is not None else None
        passes = len(active_passes(*guidance)) if guidance is not None else 1
        job = Job.of_latent(latent.video, latent.audio, latent.fps, ("encoding", "sampling"), passes=passes,
                            images=len(images), video_frames=frames * len(controls),
                            guide_tokens=sum(video_tokens(frames, *c.size(height, width)) for c in controls)
                            + appended_image_tokens(images, height, width), sampler=sampler)
        if problem := model.host.memory_problem(job, model.decoders):
            raise MemoryPlanError(problem)
        conditions = held + encode_images(images, model.video_encoder, height, width,
                                          RELEASES[model.config.version].image_crf)  # keyframes where flagged
        if audio is not None:  # held by this stage; the latent carries the sound while a stage holds it exactly
            encoded, sound = encode_audio_condition(audio, encoder, frames / latent.fps, latent.audio.shape[2])
            conditions, latent = [*conditions, encoded], latent._replace(sound=sound)
        conditions += [encode_control(control, model.video_encoder, frames, height, width)
                       for control in controls]  # appended after the images and the sound, as the pipeline
        if cache is not None and graph_setting(cuda_graphs) is True:
            raise ValueError("cache decides between steps on the host and cuda_graphs replays whole steps: set "
                             "cuda_graphs to auto or off, or disconnect the cache")
        if (compile or graph_setting(cuda_graphs) is True) and model.host.device.type != "cuda":
            raise ValueError("compile and cuda_graphs are CUDA options; switch them off for a model on the CPU")
        video_guidance, audio_guidance = guidance or (None, None)
        parts = StageParts(schedule, steps, parse_sigmas(sigmas) if sigmas.strip() else None, video_guidance,
                           audio_guidance, conditions, seed=seed, after_guided=guided_audio(given), cache=cache,
                           sampler=sampler)
        stage, negative = build_stage(model.config.version, parts, conditioning.positive, conditioning.negative)
        previews = (LatentPreview(rgb_projection(model.decoders.video), *latent.video.shape[2:])
                    if bridge.IN_COMFYUI else None)
        with model.host.sampler(model.loras, previews=previews, compile=compile, cuda_graphs=cuda_graphs,
                                should_stop=bridge.interrupt_requested) as (stage_sampler, ready), bridge.interrupts():
            generator = torch.Generator(stage_sampler.device).manual_seed(seed)
            result = stage_sampler(conditioning.positive, negative, latent, stage, generator,
                                   progress=bridge.progress_bar(stage.loop_steps, unique_id, ready))
        out = to_comfy(result, like=given if isinstance(given, dict) else None)
        return (mark_guided(out, guided(stage) or stage.keep_audio),)  # kept: a guided stage's audio
