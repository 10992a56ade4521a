"""The command line's checks before any model work (`check_early`: the request, the files, the release, the outputs,
the guidance, the devices and the parallel layout; `check_hdr_early` for --hdr) and before the models load: the memory
plan (`memory_plan`) and the whole request against the free memory (`check_memory`)."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

import torch

from ltx2_core.cli_args import DTYPES
from ltx2_core.quant.fp8_matmul import resolve as resolve_fp8_matmul
from ltx2_core.model_files import ModelFiles
from ltx2_core.parallel import ParallelConfig
from ltx2_core.conditioning.images import has_transparency
from ltx2_core.media import VIDEO_SUFFIXES, aac_sample_rates, check_target
from ltx2_core.memory.footprint import ModelSizes
from ltx2_core.memory.estimates import GB
from ltx2_core.memory.plan import MemoryPlan, MemoryPlanError
from ltx2_core.memory.request_check import request_problem
from ltx2_core.model.transformer.attention_select import check_attention, device_table
from ltx2_core.model.video_vae.tiling import TilingConfig
from ltx2_core.parallel import launch
from ltx2_core.duration import check_auto_frames
from ltx2_core.pipeline import request_job
from ltx2_core.request_models import check_stg_blocks, guidance_for
from ltx2_core.request import ONE_GPU, Request
from ltx2_core.sampling.guidance import active_passes
from ltx2_core.sampling import GuidanceParams
from ltx2_core.stages import AUDIO_SUFFIXES
from ltx2_core.video_io import video_info
from ltx2_core.exr import check_openexr
from ltx2_core.dfr import check_dfr, output_frames
from ltx2_core.dfr_layout import canvas
from ltx2_core.hdr import hdr_config
from ltx2_core.hdr_pipeline import check_hdr
from ltx2_core.loader.safetensors_file import read_header


def check_hdr_early(args: argparse.Namespace, request: Request) -> None:
    """HDR before any model work: one process, the HDR IC-LoRA among --lora (its metadata), the video and sizes
    against it, OpenEXR installed, --output a folder."""
    if layout(args).world_size > 1 or launch.ranks() > 1:
        raise ValueError("--hdr runs in one process on one GPU; drop --cfg-parallel, --sp, --tp and torchrun")
    configs = [config for path, _ in args.lora if (config := hdr_config(read_header(path, "LoRA").metadata, path))]
    if not configs:
        raise ValueError("--hdr needs the HDR IC-LoRA (its metadata states hdr_transform): add it with --lora PATH"
                         + (f"; {', '.join(path for path, _ in args.lora)} state none" if args.lora else ""))
    check_hdr(request.hdr, request.width, request.height, request.frames, configs[0].downscale)
    check_openexr()
    if Path(args.output).exists() and not Path(args.output).is_dir():
        raise ValueError(f"--output {args.output} is a file; --hdr writes a folder of EXR frames: give a folder name")
    if args.tensors:
        raise ValueError("--tensors writes frames and a waveform; --hdr writes its linear frames as EXR: drop it")


def with_guidance(request: Request, args: argparse.Namespace, files: ModelFiles) -> Request:
    """The release defaults of the model (its config read from the file header), with the command line's scales."""
    video, audio = guidance_for(request, files.transformer_config())
    if request.mode in ("distilled", "hdr"):
        return request
    return replace(request, video_guidance=_override(video, args, ""), audio_guidance=_override(audio, args, "audio_"))


def _override(params: GuidanceParams, args: argparse.Namespace, prefix: str) -> GuidanceParams:
    names = ("cfg", "stg", "rescale", "modality", "stg_blocks")
    given = {name: getattr(args, prefix + name) for name in names if getattr(args, prefix + name) is not None}
    return replace(params, **given)  # GuidanceParams checks the values (≥ 0)


def check_early(args: argparse.Namespace, request: Request, files: ModelFiles) -> Request:
    """Every check that needs no model: the request, the files, the guidance; returns the complete request."""
    request.check()
    if request.mode == "hdr":
        check_hdr_early(args, request)
    else:
        check_outputs(args, request.audio_only)
    files.check(files_mode(request))
    check_version(args, files)
    if request.mode == "dfr":  # the keyframe-slot transformer, rounds and the temporal file, from headers
        check_dfr(request.frames, request.dfr.rounds, files.transformer_config(),
                  os.path.basename(files.checkpoint) if files.checkpoint else "(the demo model)",
                  files.temporal_upsampler)
    request = with_guidance(request, args, files)
    if request.audio_only and (layout(args).world_size > 1 or launch.ranks() > 1):
        raise ValueError(ONE_GPU)
    if request.audio is not None:
        rate = request.audio.check(request.seconds).rate  # the mp4 carries the sound at its own rate, as AAC
        if rate not in aac_sample_rates():
            raise ValueError(f"the sound's sample rate {rate} Hz is not one an mp4's AAC can carry "
                             f"({', '.join(map(str, aac_sample_rates()))}); resample it first, e.g. ffmpeg -i "
                             "in.wav -ar 48000 out.wav")
    if request.retake is not None and not files.has_audio_encoder() and video_info(request.retake.video).has_sound:
        raise ValueError(f"{request.retake.video} has sound, which --retake holds, and {files.label} has no audio VAE "
                         "encoder; use the released checkpoint (LTX-2.5: its audio VAE file)")
    if request.dub is not None and not files.has_audio_encoder():
        raise ValueError(f"--dub encodes the clip's sound with the audio VAE encoder, and {files.label} has none; use "
                         "the released checkpoint (LTX-2.5: its audio VAE file)")
    if request.audio is not None and not files.has_audio_encoder():
        raise ValueError(f"--audio needs the audio VAE encoder, and {files.label} has none (a file stripped of it); "
                         "use the released checkpoint (LTX-2.5: its audio VAE file) or drop --audio")
    check_stg_blocks(request, files.transformer_config())
    check_auto_frames(request, files.has_duration_head(), files.transformer_config().version.value)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("--device cuda but no CUDA GPU is visible; use --device cpu")
    if (args.compile or args.cuda_graphs == "on") and not args.device.startswith("cuda"):
        raise ValueError("--compile and --cuda-graphs are CUDA options (off on the CPU); drop them or use --device "
                         "cuda")
    resolve_fp8_matmul(args.fp8_matmul, args.device)  # a recipe the device cannot run: refused before loading
    config = files.transformer_config()
    check_attention(args.attention, device_table(args.device), DTYPES[args.dtype] if args.dtype else None,
                    (config.video.head_dim, config.audio.head_dim))
    layout(args).check(world_size=launch.ranks(), heads=(config.video.heads, config.audio.heads),
                       devices=torch.cuda.device_count() if args.device.startswith("cuda") else None,
                       passes=len(active_passes(*guidance_for(request, config))))
    if args.memory_budget is not None and not args.memory_budget > 0:
        raise ValueError(f"--memory-budget must be a positive number of GB, got {args.memory_budget}")
    note_transparency(args)
    return request


def note_transparency(args: argparse.Namespace) -> None:
    """A note on stderr for each --image with transparent pixels: its alpha is dropped, not composited (as both
    reference pipelines read images), which the user may not expect."""
    for image in args.image:
        if launch.is_main() and has_transparency(image.image):
            print(f"note: image {image.image} has transparent pixels; its alpha channel is dropped, as Lightricks' "
                  "pipelines do, so they show the colour stored under them: flatten the image onto the background "
                  "you want first (e.g. convert in.png -background black -flatten out.png)", file=sys.stderr)


def check_version(args: argparse.Namespace, files: ModelFiles) -> None:
    """--version picks the demo's structure; with a checkpoint the release is the file's, so another is refused."""
    release = files.transformer_config().version.value
    if args.version not in (None, release):
        raise ValueError(f"--version {args.version} picks the demo model's structure, and --checkpoint "
                         f"{args.checkpoint} is an LTX-{release} model (its header says so): drop --version, or give "
                         f"an LTX-{args.version} checkpoint")


def check_outputs(args: argparse.Namespace, audio_only: bool) -> None:
    """--output and --tensors can be written, each in the format its name says: checked before any model work, so
    that a generation never ends unwritten."""
    if audio_only and not Path(args.output).is_dir() and not args.output.lower().endswith(AUDIO_SUFFIXES):
        raise ValueError(f"--audio-only writes the sound alone: give --output a {', '.join(AUDIO_SUFFIXES)} name, got "
                         f"{args.output}")
    outputs = (("--output", args.output, AUDIO_SUFFIXES if audio_only else VIDEO_SUFFIXES,
                "sound" if audio_only else "an MP4 (H.264 video, AAC sound; --audio-only writes a .wav)"),
               ("--tensors", args.tensors, (".safetensors",), "a safetensors file of the frames and waveform"))
    for flag, path, suffixes, what in outputs:
        if path is not None:
            try:
                check_target(path, suffixes, what)
            except ValueError as exc:
                raise ValueError(f"{flag} {path}: {exc}") from None


def files_mode(request: Request) -> str:
    """The mode whose files a request needs: sound for a video and a retake run one stage whatever its schedule (no upsampler,
    no LoRA), so it needs the one-stage files."""
    return "one-stage" if request.one_stage_input else "distilled" if request.mode == "hdr" else request.mode


def memory_plan(args: argparse.Namespace, request: Request, files: ModelFiles) -> MemoryPlan | None:
    """The plan of what stays on the device (before any model loads), or None when everything stays: on the CPU
    without a budget, with --memory resident, or under tensor parallelism (whose shards are planned per rank)."""
    if layout(args).world_size > 1 or args.memory == "resident":
        return None
    if args.cuda_graphs == "on" or args.compile:
        raise ValueError(f"--memory {args.memory} may stream blocks, which --compile and --cuda-graphs on do not "
                         "support; add --memory resident")
    config = files.transformer_config()
    budget = int(args.memory_budget * GB) if args.memory_budget else None
    frames = min(request.frames, request.windows.window) if request.windows is not None else request.frames
    if request.dfr is not None:  # DFR: the padded canvas at the output rate (a bound: a round's tile is smaller)
        frames = output_frames(canvas(request.frames)[0], request.dfr.rounds)
    return files.plan(args.device, frames=frames, height=request.height, width=request.width,
                      passes=len(active_passes(*guidance_for(request, config))), two_stage=request.two_stage,
                      fps=request.fps, images=len(request.images) + request.video_frames, dtype=DTYPES[args.dtype] if args.dtype else None,
                      memory=args.memory, budget=budget, source=None if budget else f"free on {args.device}",
                      enhance=request.enhance_prompt)


def check_memory(args: argparse.Namespace, request: Request, sizes: ModelSizes, plan: MemoryPlan | None) -> None:
    """The whole request (its latents, activations, decode tiles, frames, the mp4's buffers) against the free memory
    of the device and the host (`memory.footprint`), checked before the models load (`sizes` from the files'
    headers) and again once they are (what they hold is then taken); MemoryPlanError names the nearest size that
    fits. A parallel run's ranks meet their own devices' memory."""
    cap = args.passes_per_forward or (plan.passes_per_forward if plan is not None else None)
    job = request_job(request, sizes.config, plan.tiling() if plan is not None else TilingConfig())
    if problem := request_problem(job, sizes._replace(passes_per_forward=cap), torch.device(args.device)):
        raise MemoryPlanError(problem)


def layout(args: argparse.Namespace) -> ParallelConfig:
    return ParallelConfig(args.cfg_parallel, args.sp, args.tp)
