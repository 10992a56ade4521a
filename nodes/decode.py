"""Upsampling and decoding nodes: the latent x2, and video frames (IMAGE) + sound (AUDIO) for CreateVideo."""

from __future__ import annotations

import torch

from ltx2_core import TilingConfig
from ltx2_core.memory.footprint import Job
from ltx2_core.memory.plan import MemoryPlanError
from ltx2_core.model.upsampler import LatentUpsampler
from ltx2_core.pipeline import Distribution
from ltx2_core.stages import AVLatent, Generation, decode, upsample

from .handles import LATENT, MODEL, UPSAMPLER, ModelHandle
from .interop import from_comfy, to_comfy
from .sampling import MAX_SEED


def comfy_outputs(result: Generation) -> tuple:
    """(IMAGE frames (F, H, W, 3) in [0, 1], AUDIO {"waveform": (1, C, S) float32, "sample_rate"}, fps): the decoded
    stereo at the vocoder's rate, or the sound the latent holds (mono or stereo) at its own rate."""
    waveform = result.waveform.to("cpu", torch.float32).contiguous()
    return result.frames, {"waveform": waveform[None], "sample_rate": int(result.sample_rate)}, result.fps


def decode_spread(model: ModelHandle) -> Distribution:
    """How a pipeline decodes the model's latents: the video's tiles across the model's workers (each loads the video
    decoder once), or here (a model without workers: `pipeline.SINGLE_PROCESS`)."""
    return Distribution(video_decode=model.host.video_decode)


class LTX2LatentUpsample:
    DESCRIPTION = "Doubles the video latent's width and height with the x2 latent upsampler (audio unchanged)."
    CATEGORY = "LTX-2/latent"
    RETURN_TYPES = (LATENT,)
    RETURN_NAMES = ("latent",)
    FUNCTION = "upsample"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "model": (MODEL, {"tooltip": "the model whose VAE statistics the upsampler works in"}),
            "upsampler": (UPSAMPLER, {"tooltip": "from LTX2 Upsampler Loader"}),
            "latent": (LATENT, {"tooltip": "the stage-1 latent (ours or a native LTX-2 one, video-only too)"}),
        }}

    def upsample(self, model: ModelHandle, upsampler: LatentUpsampler, latent: dict | AVLatent):
        """ComfyUI's LATENT (ours or a native one, video-only too) x2; its other keys kept."""
        given = from_comfy(latent, video_only=True)
        job = Job.of_latent(given.video, given.audio, given.fps, ("upsampling",), two_stage=True)
        job = job._replace(height=2 * job.height, width=2 * job.width)  # counted at the upsampled size
        if problem := model.check_loaded().host.memory_problem(job, model.decoders, upsampler):
            raise MemoryPlanError(problem)
        result = upsample(given, upsampler, model.decoders)
        return (to_comfy(result, like=latent if isinstance(latent, dict) else None),)


class LTX2Decode:
    DESCRIPTION = ("Decodes video frames (IMAGE) and stereo sound (AUDIO); a latent sampled to a sound held exactly "
                   "(LTX-2 Audio Condition) gives that sound unchanged. With the fps, CreateVideo -> SaveVideo. A "
                   "model on several GPUs (LTX-2 Multi-GPU Layout) decodes the video's tiles across its workers.")
    CATEGORY = "LTX-2/latent"
    RETURN_TYPES = ("IMAGE", "AUDIO", "FLOAT")
    RETURN_NAMES = ("images", "audio", "fps")
    FUNCTION = "decode"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "model": (MODEL, {"tooltip": "the model whose VAE and vocoder decode"}),
            "latent": (LATENT, {"tooltip": "the sampled latent (ours or a native audio + video one)"}),
            "spatial_tile": ("INT", {"default": 512, "min": 0, "max": 4096, "step": 32,
                                     "tooltip": "tile size in pixels (0: no spatial tiling); smaller tiles use less "
                                                "memory (and spread over more GPUs with a multi-GPU layout)"}),
            "temporal_tile": ("INT", {"default": 64, "min": 0, "max": 1024, "step": 8,
                                      "tooltip": "frames per chunk (0: no temporal tiling; the LTX-2.5 diffusion "
                                                 "decoder tiles in space only)"}),
        }, "optional": {
            "seed": ("INT", {"default": 0, "min": 0, "max": MAX_SEED, "control_after_generate": False,
                             "tooltip": "the starting noise of the LTX-2.5 diffusion decoder, which denoises pixels "
                                        "in two steps (the convolutional decoders draw no noise)"}),
        }}

    def decode(self, model: ModelHandle, latent: dict | AVLatent, spatial_tile: int = 512, temporal_tile: int = 64,
               seed: int = 0):
        tiling = TilingConfig(spatial_tile=spatial_tile or None, spatial_overlap=64 if spatial_tile else 0,
                              temporal_tile=temporal_tile or None, temporal_overlap=24 if temporal_tile else 0)
        decoders, given = model.check_loaded().decoders, from_comfy(latent)
        job = Job.of_latent(given.video, given.audio, given.fps, ("decoding", "frames", "writing"), tiling=tiling)
        if problem := model.host.memory_problem(job, decoders):
            raise MemoryPlanError(problem)
        generator = torch.Generator(next(decoders.video.parameters()).device).manual_seed(seed)
        return comfy_outputs(decode(given, decoders, tiling, generator=generator,
                                    video_decode=model.host.video_decode))
