"""LTX-2 SamplerCustomAdvanced (fast): ComfyUI's SamplerCustomAdvanced with the same five inputs and two outputs,
running our sampler (every guidance pass batched in one forward, no host sync per step) on the guider's native MODEL
and CONDITIONING, so a native LTX-2 workflow is sped up by swapping this one node (docs/interop/native_sampler.md).
"""

from __future__ import annotations

import math

import torch

from ltx2_core import GuidanceParams
from ltx2_core.memory.footprint import Job
from ltx2_core.memory.plan import MemoryPlanError
from ltx2_core.sampling.cache import CacheSettings
from ltx2_core.sampling.recipe import StageParts, build_stage

from . import bridge
from .interop import from_comfy, mask_conditions, to_comfy
from .native_conditioning import check_native, from_native
from .native_model import NATIVE_SAMPLER, native_configs, native_connectors, native_host

CATEGORY = "LTX-2/sampling"
GUIDERS = ("CFGGuider", "Guider_Basic")  # ComfyUI's CFGGuider and BasicGuider nodes' objects
SAMPLERS = {"sample_euler": False, "sample_euler_ancestral": True}  # KSamplerSelect's function -> ancestral
# what a model patch or a guider option would change in ComfyUI's own loop and ours does not run
PATCH_KEYS = ("model_function_wrapper", "sampler_cfg_function", "sampler_post_cfg_function",
              "sampler_pre_cfg_function", "sampler_calc_cond_batch_function", "denoise_mask_function")
TRANSFORMER_PATCHES = ("patches", "patches_replace")
CACHE_KEY = "easycache"  # where ComfyUI's EasyCache / LazyCache nodes keep their holder in transformer_options


def native_cache(options: dict, patcher: object) -> CacheSettings | None:
    """The step cache of a MODEL patched by ComfyUI's EasyCache node: its threshold, start/end percent (made σ by
    the MODEL's own model sampling, as EasyCache does) and subsampling, for our loop's cache (the same decisions);
    None without one. LazyCache is refused: it caches ComfyUI's guided prediction of its packed latent, which has
    no counterpart per pass in our loop."""
    transformer = options.get("transformer_options", {})
    keys = {key for by_key in (transformer.get("wrappers") or {}).values() for key in by_key}
    holder = transformer.get(CACHE_KEY)
    if "lazycache" in keys or type(holder).__name__ == "LazyCacheHolder":
        raise ValueError("the MODEL carries LazyCache, which caches ComfyUI's whole guided prediction and has no "
                         "counterpart in our loop; use ComfyUI's EasyCache node instead (this node honours it, per "
                         f"guidance pass, video and audio), or {NATIVE_SAMPLER} for LazyCache")
    if holder is None:
        if CACHE_KEY in keys:
            raise ValueError("the MODEL carries EasyCache's wrappers without its settings; re-add the EasyCache node")
        return None
    sampling = patcher.get_model_object("model_sampling")
    start, end = float(holder.start_percent), float(holder.end_percent)
    return CacheSettings(reuse_threshold=float(holder.reuse_threshold), start_percent=start, end_percent=end,
                         subsample=int(holder.subsample_factor), start_sigma=float(sampling.percent_to_sigma(start)),
                         end_sigma=float(sampling.percent_to_sigma(end)),
                         verbose=bool(getattr(holder, "verbose", False)))


def _native_conds(converted: list[dict] | None) -> list | None:
    """ComfyUI's guider keeps each CONDITIONING converted (`convert_cond`: the tensor as `cross_attn`); back to the
    [[tensor, options]] list the CONDITIONING socket carries."""
    if converted is None:
        return None
    skip = ("cross_attn", "model_conds", "uuid")
    return [[c.get("cross_attn"), {k: v for k, v in c.items() if k not in skip}] for c in converted]


def check_guider(guider: object) -> tuple[object, list, list | None, float]:
    """(model patcher, positive, negative or None, cfg) of a CFGGuider / BasicGuider; ValueError naming the fix for
    any other guider or for model patches our loop would not run."""
    name = type(guider).__name__
    if name not in GUIDERS or not hasattr(guider, "model_patcher"):
        raise ValueError(f"guider: {name} is not supported here; connect CFGGuider or BasicGuider, or use "
                         f"{NATIVE_SAMPLER} for this guider")
    options = getattr(guider, "model_options", None) or guider.model_patcher.model_options
    transformer = options.get("transformer_options", {})
    patched = [k for k in PATCH_KEYS if options.get(k)] + [k for k in TRANSFORMER_PATCHES if transformer.get(k)]
    if patched:
        raise ValueError(f"the MODEL carries model patches ({', '.join(patched)}) that change ComfyUI's own sampling "
                         f"loop; use {NATIVE_SAMPLER} for it, or remove the patch nodes (LoRAs are fine)")
    conds = guider.original_conds
    if "positive" not in conds:
        raise ValueError("guider: it has no positive conditioning; connect the prompts to CFGGuider / BasicGuider")
    cfg = float(getattr(guider, "cfg", 1.0))
    negative = _native_conds(conds.get("negative"))
    if not math.isclose(cfg, 1.0) and negative is None:
        raise ValueError(f"guider: cfg {cfg} needs a negative prompt; connect one to CFGGuider or set cfg to 1")
    return guider.model_patcher, _native_conds(conds["positive"]), negative, cfg


def check_sampler(sampler: object) -> bool:
    """False: Euler steps; True: ancestral rectified-flow Euler steps (η = 1), as ComfyUI's euler_ancestral runs
    them on LTX-2 (`sample_euler_ancestral_RF`: the same step as ours, `ltx2_core.sampling.steps`)."""
    function = getattr(sampler, "sampler_function", None)
    name = getattr(function, "__name__", type(sampler).__name__)
    if name not in SAMPLERS:
        raise ValueError(f"sampler: {name.removeprefix('sample_')} is not supported here; pick euler or "
                         "euler_ancestral in KSamplerSelect (the cfg_pp samplers also run the negative prompt at "
                         f"cfg 1), or use {NATIVE_SAMPLER}")
    options = getattr(sampler, "extra_options", {}) or {}
    eta, s_noise = float(options.get("eta", 1.0)), float(options.get("s_noise", 1.0))
    if SAMPLERS[name] and not (math.isclose(eta, 1.0) and math.isclose(s_noise, 1.0)):
        raise ValueError(f"sampler: euler_ancestral with eta {eta}, s_noise {s_noise}; ours takes 1 and 1: use "
                         f"KSamplerSelect's euler_ancestral, or {NATIVE_SAMPLER}")
    return SAMPLERS[name]


def check_sigmas(sigmas: torch.Tensor) -> tuple[float, ...]:
    values = tuple(float(v) for v in torch.as_tensor(sigmas).flatten().tolist())
    if (len(values) < 2 or values[-1] != 0 or values[0] > 1 or not all(map(math.isfinite, values))
            or any(a <= b for a, b in zip(values, values[1:]))):
        raise ValueError(f"sigmas must fall strictly from at most 1 to 0 (ManualSigmas '1.0, 0.5, 0.0', "
                         f"LTXVScheduler, ...); got {values[:8]}")
    return values


def check_noise(noise: object) -> int:
    seed = getattr(noise, "seed", None)
    if type(noise).__name__ == "Noise_EmptyNoise" or not isinstance(seed, int):
        raise ValueError("noise: connect RandomNoise (its seed seeds our sampler's noise); DisableNoise is not "
                         f"supported here, use {NATIVE_SAMPLER} for it")
    return seed


class LTX2SamplerCustomAdvanced:
    DESCRIPTION = ("ComfyUI's SamplerCustomAdvanced for LTX-2, faster: the same inputs and outputs, our sampler "
                   "(CFG's two passes batched in one forward, no host sync per step) on the guider's own MODEL "
                   "(its LoRAs, its layers, no weight copied) and CONDITIONING. Swap it for SamplerCustomAdvanced in "
                   "a native LTX-2 workflow. Runs euler / euler_ancestral with CFGGuider / BasicGuider; the noise "
                   "comes from our generator seeded with RandomNoise's seed. A MODEL patched by ComfyUI's EasyCache "
                   "node is cached as EasyCache decides (its settings, per guidance pass, video and audio).")
    CATEGORY = CATEGORY
    RETURN_TYPES = ("LATENT", "LATENT")
    RETURN_NAMES = ("output", "denoised_output")
    FUNCTION = "sample"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "noise": ("NOISE", {"tooltip": "RandomNoise: its seed seeds our sampler's noise"}),
            "guider": ("GUIDER", {"tooltip": "CFGGuider or BasicGuider with an LTX-2 MODEL and its prompts"}),
            "sampler": ("SAMPLER", {"tooltip": "KSamplerSelect: euler or euler_ancestral"}),
            "sigmas": ("SIGMAS", {"tooltip": "falling from at most 1 to 0 (ManualSigmas, LTXVScheduler, ...); the "
                                  "latent is noised to the first"}),
            "latent_image": ("LATENT", {"tooltip": "ComfyUI's LTX-2 audio + video latent (LTXVConcatAVLatent), "
                                        "empty or to refine"}),
        }, "hidden": {"unique_id": "UNIQUE_ID"}}

    def sample(self, noise, guider, sampler, sigmas, latent_image: dict, unique_id: str | None = None):
        seed, ancestral = check_noise(noise), check_sampler(sampler)
        values = check_sigmas(sigmas)
        patcher, positive, negative, cfg = check_guider(guider)
        cache = native_cache(getattr(guider, "model_options", None) or patcher.model_options, patcher)
        for prompts in (positive, negative):
            if prompts is not None:
                check_native(prompts)  # LTXVAddGuide's guides, areas, ...: refused before the model loads
        config, text = native_configs(patcher.model.model_config.unet_config)
        held = mask_conditions(latent_image)  # LTXVImgToVideo(Inplace)'s frames, as our image conditions
        latent = from_comfy(latent_image)
        if latent.video is None:
            raise ValueError("latent_image: an audio-only latent; this node samples video + audio (LTXVConcatAVLatent "
                             "of EmptyLTXVLatentVideo and LTXVEmptyLatentAudio); for sound alone use LTX-2 Generate's "
                             "audio_only")
        diffusion_model, device, dtype = bridge.load_native_model(patcher, tuple(latent.video.shape))
        connectors = native_connectors(diffusion_model, text, device, dtype)
        positive, fps = from_native(positive, connectors, config.video.context_dim)
        negative = None if negative is None or math.isclose(cfg, 1.0) else from_native(negative, connectors,
                                                                                       config.video.context_dim)[0]
        if fps is not None:
            latent = latent._replace(fps=float(fps))
        guidance = GuidanceParams(cfg=cfg)
        host = native_host(diffusion_model, config, device, dtype)
        passes = 1 if negative is None else 2  # CFG's two
        job = Job.of_latent(latent.video, latent.audio, latent.fps, ("sampling",), passes=passes)
        if problem := host.memory_problem(job):
            raise MemoryPlanError(problem)
        parts = StageParts(sigmas=values, video_guidance=guidance, audio_guidance=guidance, conditions=held,
                           seed=seed, ancestral_seed=seed + 1 if ancestral else None, cache=cache)
        stage, _ = build_stage(config.version, parts, positive, negative)
        with host.sampler(should_stop=bridge.interrupt_requested) as (run, ready), \
                bridge.interrupts():
            generator = torch.Generator(device).manual_seed(seed)
            result = run(positive.to(device), None if negative is None else negative.to(device), latent, stage,
                         generator, progress=bridge.progress_bar(len(values) - 1, unique_id, ready))
        out = to_comfy(result, like=latent_image)
        return (out, out)
