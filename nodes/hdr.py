"""HDR video from an SDR video with the HDR IC-LoRA (ltx2_core.hdr_pipeline), and the EXR writer of its linear
frames (ltx2_core.exr)."""

from __future__ import annotations

import os

import torch

from ltx2_core import Models, Request
from ltx2_core.exr import check_openexr, write_exr_sequence
from ltx2_core.hdr import HDR, srgb_preview
from ltx2_core.hdr_pipeline import HdrGeneration, check_hdr, check_hdr_models, find_hdr_lora, generate_hdr
from ltx2_core.media import write_mp4
from ltx2_core.memory.plan import MemoryPlanError
from ltx2_core.model.upsampler import LatentUpsampler
from ltx2_core.pipeline import request_job
from ltx2_core.runtime.float32_decode import float32_decode
from ltx2_core.video_io import VideoFrames

from . import bridge
from .generate import ProgressSampler, StageBars
from .handles import CONDITIONING, MODEL, UPSAMPLER, Conditioning, ModelHandle
from .sampling import MAX_FRAMES, MAX_SEED
from .validation import limits_problem

HDR_TYPE = "LTX2_HDR"  # an ltx2_core HdrGeneration: linear Rec.709 frames (F, H, W, 3) fp32 and their fps


class LTX2HDR:
    DESCRIPTION = ("Makes an SDR (Rec.709) video HDR with the HDR IC-LoRA, which the model must carry (LTX-2 LoRA "
                   "Loader; its metadata states the curve), as Lightricks' HDRICLoraPipeline: a distilled model, the "
                   "video only (no sound), stage 1 at half size, stage 2 in 2x2x2 tiles, decoded in fp32 to "
                   "scene-linear Rec.709 light. Outputs an sRGB preview (IMAGE), the linear frames (LTX-2 Save EXR) "
                   "and the fps.")
    CATEGORY = "LTX-2/generate"
    RETURN_TYPES = ("IMAGE", HDR_TYPE, "FLOAT")
    RETURN_NAMES = ("preview", "hdr", "fps")
    OUTPUT_TOOLTIPS = ("the HDR frames clamped to [0, 1] and sRGB-encoded (exposure 0)",
                       "the linear HDR frames (values above 1 kept), for LTX-2 Save EXR", "the frame rate")
    FUNCTION = "generate"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "model": (MODEL, {"tooltip": "a distilled LTX-2 model carrying the HDR IC-LoRA (LTX-2 LoRA Loader)"}),
            "conditioning": (CONDITIONING, {"tooltip": "the encoded prompt (LTX-2 Text Encode; the positive is "
                                            "used)"}),
            "upsampler": (UPSAMPLER, {"tooltip": "the x2 latent upsampler"}),
            "images": ("IMAGE", {"tooltip": "the SDR video's frames (Load Video -> Get Video Components)"}),
            "fps": ("FLOAT", {"default": 24.0, "min": 1.0, "max": 120.0, "step": 0.01,
                              "tooltip": "the video's frame rate (wire Get Video Components' fps)"}),
            "width": ("INT", {"default": 0, "min": 0, "max": 8192, "tooltip": "output pixels, at least 64; 0: the "
                              "video's (generated at a multiple of 64 and cropped back)"}),
            "height": ("INT", {"default": 0, "min": 0, "max": 8192, "tooltip": "output pixels, at least 64; 0: the "
                               "video's"}),
            "frames": ("INT", {"default": 0, "min": 0, "max": MAX_FRAMES, "tooltip": "output frames, 8k+1; 0: the "
                               "most the video holds"}),
            "seed": ("INT", {"default": 10, "min": 0, "max": MAX_SEED, "control_after_generate": True,
                             "tooltip": "the noise seed (stage 2's tile i: seed + i)"}),
            "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.01,
                                   "tooltip": "the video's guiding strength (1: its tokens kept clean)"}),
            "high_quality": ("BOOLEAN", {"default": False, "tooltip": "generate 2N-1 frames from each video frame "
                                         "twice and keep every other one: smoother, about twice the time"}),
        }, "hidden": {"unique_id": "UNIQUE_ID"}}

    @classmethod
    def VALIDATE_INPUTS(cls, fps: float | None = None, strength: float | None = None):
        """The two numbers' limits, NaN too."""
        return limits_problem(cls, dict(fps=fps, strength=strength)) or True

    def generate(self, model: ModelHandle, conditioning: Conditioning, upsampler: LatentUpsampler,
                 images: torch.Tensor, fps: float, width: int, height: int, frames: int, seed: int,
                 strength: float, high_quality: bool, unique_id: str | None = None):
        video = VideoFrames(images, float(fps))
        info = video.info()  # shape, empty batch, dtype, range: refused now
        frames = frames or max(1, (info.frames - 1) // 8 * 8 + 1)
        hdr = HDR(video, float(strength), bool(high_quality))
        request = Request("(text embeddings given)", width=width or info.width, height=height or info.height,
                          frames=frames, fps=float(fps), seed=seed, mode="hdr", hdr=hdr)
        request.check()
        config = find_hdr_lora(model.loras)  # before the model is touched: the LoRA's metadata
        check_hdr(hdr, request.width, request.height, frames, config.downscale)
        model = model.check_loaded()
        models = Models(model.host.transformer, None, model.decoders, upsampler, None, model.video_encoder,
                        None, tuple(model.loras))
        check_hdr_models(models)  # the upsampler, the video encoder
        job = request_job(request, model.config, model.host.tiling())
        if problem := model.host.memory_problem(job, model.decoders, upsampler):  # fp32 decode here or on workers
            raise MemoryPlanError(problem)
        with model.host.sampler((), should_stop=bridge.interrupt_requested) as (sampler, ready), bridge.interrupts():
            bars = ProgressSampler(sampler, StageBars(unique_id, ready), _call_name)
            result = generate_hdr(request, models, sampler=bars, tiling=model.host.tiling(),
                                  positive=conditioning.positive, video_decode=float32_decode(model.host.video_decode))
        return srgb_preview(result.linear), result, result.fps


class LTX2SaveEXR:
    DESCRIPTION = ("Writes linear HDR frames (LTX-2 HDR) as an OpenEXR sequence, as Lightricks' HDR pipeline writes "
                   "them: output/<prefix>_00001/frame_00000.exr ... (RGB, half or full float, ZIP, Rec.709 "
                   "chromaticities), and an sRGB preview.mp4 beside them. Needs the OpenEXR package (pip install "
                   "OpenEXR, in the pack's requirements).")
    CATEGORY = "LTX-2/output"
    RETURN_TYPES = ()
    OUTPUT_NODE = True
    FUNCTION = "save"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "hdr": (HDR_TYPE, {"tooltip": "the linear HDR frames (LTX-2 HDR)"}),
            "filename_prefix": ("STRING", {"default": "LTX2_HDR", "tooltip": "the folder's name in ComfyUI's output "
                                           "folder (a counter is added; a / makes sub-folders)"}),
            "half": ("BOOLEAN", {"default": True, "tooltip": "half float (the reference's); off: full float"}),
            "preview": ("BOOLEAN", {"default": True, "tooltip": "also write preview.mp4 (clamped, sRGB)"}),
        }}

    def save(self, hdr: HdrGeneration, filename_prefix: str = "LTX2_HDR", half: bool = True, preview: bool = True):
        check_openexr()  # the fix named before a folder is made
        folder = next_folder(bridge.output_folder(), filename_prefix)
        paths = write_exr_sequence(hdr.linear, folder, half=bool(half))
        if preview:
            write_mp4(os.path.join(folder, "preview.mp4"), srgb_preview(hdr.linear), hdr.fps)
        return {"ui": {"text": [f"{len(paths)} EXR frames in {folder}"]}}


def _call_name(call: int, stage) -> str:
    """HDR's sampler calls: stage 1, then stage 2's tiles (all named "stage 2")."""
    return "stage 1" if call == 1 else f"stage 2 tile {call - 1}"


def next_folder(root: str, prefix: str) -> str:
    """root/prefix_00001 (the first number not taken); ValueError for a prefix leaving the root."""
    base = os.path.abspath(os.path.join(root, prefix or "LTX2_HDR"))
    if os.path.commonpath([base, os.path.abspath(root)]) != os.path.abspath(root):
        raise ValueError(f"filename_prefix {prefix!r} leaves the output folder; give a name inside it")
    number = 1
    while os.path.exists(f"{base}_{number:05d}"):
        number += 1
    return f"{base}_{number:05d}"
