"""Command line: `python -m ltx2_core generate [options]` (also the default without a subcommand).

Text to video + audio with the one-stage, two-stage or distilled pipeline, written to an mp4 (H.264 + AAC stereo).
Without --checkpoint it runs a tiny random-weight DEMO model built in code (every component at toy size: the
result is noise with noise for sound, at the requested size and length), so the whole path runs on any machine.
With --checkpoint it loads the official LTX-2 / LTX-2.3 single-file checkpoint with --text-encoder (Gemma 3 12B),
or LTX-2.5's files: the transformer file with --text-encoder (Gemma 4 12B with the text projection), --vae and
--audio-vae, or the folder holding them (ComfyUI's models folder or one flat folder, each file found by its header);
or a GGUF transformer with --text-encoder, --vae, --audio-vae and --text-projection (the text projection and the
connectors it lacks); and for two-stage --upsampler and --distilled-lora. Every argument and file is checked before any model work.

--video PATH generates the sound for an existing silent video: the clip's width, height, frames and fps are the
file's, its frames are held (frozen) while the sound is sampled in one stage (one-stage: guided; distilled: 8 steps,
no guidance), and the mp4 written carries the video through a VAE round trip with the new sound. A file that already
has a sound track is refused unless --replace-sound is given (its sound is then not read, and not written).

--control PATH[:STRENGTH[:ATTENTION[:MASK]]] guides the video by a control video (depth, pose, edges) through an
IC-LoRA given with --lora: encoded at the size the LoRA's reference_downscale_factor metadata asks for (LoRAs asking
different factors are refused), its first --frames frames (a shorter video is refused), in stage 1 of a two-stage
run; ATTENTION below 1 and a MASK video weigh the attention between the control and the video, as the reference's
--conditioning-attention-mask MASK ATTENTION (`conditioning.control`).
--retake PATH:START:END regenerates [START, END) seconds of an existing video (its frames and, when it has sound, its
sound) with the prompt and keeps the rest, as Lightricks' `RetakePipeline`: the clip is the file's, one stage
(one-stage: guided; distilled: 8 steps, no guidance); --keep-video or --keep-audio keeps that stream whole. The mp4
written carries both streams through a VAE round trip (kept parts included), as the reference returns them.
--dub CLIP [STRENGTH] re-voices a clip with the prompt, as Lightricks' `DubItPipeline` (with --lora the Dub-It IC-LoRA;
the distilled pipeline): the clip's first 8k+1 frames at its fps guide the video in both stages, its sound is the
audio reference (`conditioning.dub`).
--hdr VIDEO [STRENGTH] makes an SDR video HDR with the HDR IC-LoRA (--lora, a distilled --checkpoint, --upsampler),
as Lightricks' `HDRICLoraPipeline`: the video only (no sound), two stages (stage 2 in 2x2x2 tiles), written as
--output DIR/frame_00000.exr ... (scene-linear Rec.709, half float) and DIR/preview.mp4 (sRGB); --hdr-high-quality
generates twice the frames and keeps every other one.
--duration SECONDS makes a clip of any length: longer than one --window (8k+1 frames, default 121) it is sampled as
windows sharing --overlap frames (a multiple of 8, default 24), each holding the previous one's last frames of video
and sound, with --window-prompt giving window by window prompts; the windows are joined and decoded as one clip
(docs/video_in/long_video.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
from safetensors.torch import save_file
from tqdm import tqdm

from ltx2_core.cli_args import DTYPES, parse_args
from ltx2_core.compile import compile_blocks
from ltx2_core.quant.fp8_matmul import resolve as resolve_fp8_matmul
from ltx2_core.errors import LTX2Error
from ltx2_core.model_files import ModelFiles
from ltx2_core.parallel import ParallelConfig
from ltx2_core.loader.lora import lora_reference_scale, reference_downscale_factor
from ltx2_core.conditioning.control import ControlCondition
from ltx2_core.conditioning.images import has_transparency
from ltx2_core.conditioning.dub import Dub
from ltx2_core.conditioning.retake import Retake
from ltx2_core.conditioning.video import VideoCondition
from ltx2_core.releases import DEFAULT_VERSION, RELEASES
from ltx2_core.media import VIDEO_SUFFIXES, aac_sample_rates, check_target
from ltx2_core.memory.footprint import ModelSizes
from ltx2_core.memory.plan import GB, MemoryPlan, MemoryPlanError
from ltx2_core.memory.request_check import request_problem
from ltx2_core.model.text.enhance import system_prompt
from ltx2_core.model.transformer.attention_select import check_attention, device_table, set_attention
from ltx2_core.model.video_vae.tiling import TilingConfig
from ltx2_core.parallel import launch
from ltx2_core.parallel.text_encode import spread_text
from ltx2_core.duration import AutoFrames, check_auto_frames, predict_seconds, with_length
from ltx2_core.pipeline import (Distribution, Generation, check_stg_blocks, encode_request, enhance_request,
                                generate, guidance_for, request_job)
from ltx2_core.request import ONE_GPU, Request
from ltx2_core.sampling.cache import CacheSettings, print_record
from ltx2_core.sampling.guidance import active_passes
from ltx2_core.sampling import GuidanceParams
from ltx2_core.stages import AUDIO_SUFFIXES
from ltx2_core.video_io import video_info
from ltx2_core.long_video import generate_long
from ltx2_core.windows import DEFAULT_OVERLAP, DEFAULT_WINDOW, Windows, frames_for
from ltx2_core.exr import check_openexr
from ltx2_core.dfr import DFR, check_dfr, output_frames
from ltx2_core.dfr_layout import canvas
from ltx2_core.hdr import HDR, hdr_config
from ltx2_core.hdr_pipeline import HdrGeneration, check_hdr, generate_hdr
from ltx2_core.loader.safetensors_file import read_header
from ltx2_core.pipeline import LocalSampler
from ltx2_core.types import TextEmbeddings
from safetensors import safe_open

def control_conditions(args: argparse.Namespace) -> tuple[ControlCondition, ...]:
    """The --control videos at the downscale factor the --lora files state (conflicts refused naming both)."""
    if not args.control:
        return ()
    if not args.lora:
        raise ValueError("--control guides the generation through an IC-LoRA; add it with --lora PATH (e.g. "
                         "ltx-2-19b-ic-lora-depth-control.safetensors), or drop --control")
    factor = reference_downscale_factor([path for path, _ in args.lora])
    return tuple(control._replace(downscale=factor) for control in args.control)


def cache_settings(args: argparse.Namespace) -> CacheSettings | None:
    """--cache and its settings (ComfyUI's EasyCache defaults where not given); ValueError naming the fix."""
    given = {"threshold": args.cache_threshold, "start": args.cache_start, "end": args.cache_end}
    if args.cache == "none":
        if named := [f"--cache-{k}" for k, v in given.items() if v is not None]:
            raise ValueError(f"{', '.join(named)} set step caching up: add --cache easycache, or drop them")
        return None
    if args.cuda_graphs == "on" or args.cfg_parallel > 1 or args.audio_only:
        raise ValueError("--cache easycache decides between steps on the host, per pass, on the video: drop it, or "
                         "drop --cuda-graphs on (auto runs the cached steps eagerly) / --cfg-parallel / --audio-only")
    defaults = CacheSettings()
    return CacheSettings(reuse_threshold=defaults.reuse_threshold if given["threshold"] is None else given["threshold"],
                         start_percent=defaults.start_percent if given["start"] is None else given["start"],
                         end_percent=defaults.end_percent if given["end"] is None else given["end"],
                         report=print_record)


def build_request(args: argparse.Namespace) -> Request:
    if args.system_prompt is not None and not args.enhance_prompt:
        raise ValueError("--system-prompt goes with --enhance-prompt (the prompt enhancer's instructions); drop it "
                         "or add --enhance-prompt")
    if args.enhance_prompt:  # the system prompt is found (or refused) before any model work
        system_prompt("gemma3", False, args.system_prompt)
    request = replace(_one_request(args), cache=cache_settings(args), enhance_prompt=args.enhance_prompt,
                      system_prompt=args.system_prompt, sampler=args.sampler)
    if request.stage_sampler == "res_2s" and args.cuda_graphs == "on":
        raise ValueError("res_2s steps are not captured as CUDA graphs: drop --cuda-graphs on (auto runs them "
                         "eagerly), or add --sampler euler")
    if args.duration is None:
        if args.window is not None or args.overlap is not None or args.window_prompt:
            raise ValueError("--window, --overlap and --window-prompt cut a long clip: give its length with "
                             "--duration SECONDS, or drop them")
        return request
    return replace(request, frames=frames_for(args.duration, request.fps), windows=Windows(
        DEFAULT_WINDOW if args.window is None else args.window,
        DEFAULT_OVERLAP if args.overlap is None else args.overlap, tuple(args.window_prompt)))


def _one_request(args: argparse.Namespace) -> Request:
    if args.duration is not None and args.auto_duration is not None:
        raise ValueError("--duration gives the clip's length and --auto-duration predicts one: drop one of them")
    if args.duration is not None:
        for flag, given in (("--frames", args.frames), ("--retake", args.retake), ("--video", args.video)):
            if given is not None:
                raise ValueError(f"--duration makes a long clip window by window and {flag} is given: give "
                                 f"--duration or {flag}" + (" (a file's clip is sampled in one window)"
                                                            if flag != "--frames" else ""))
    if args.hdr is not None:
        return _hdr_request(args)
    if args.hdr_high_quality or args.text_embeddings:
        raise ValueError("--hdr-high-quality and --text-embeddings go with --hdr VIDEO; add it or drop them")
    if (args.keep_video or args.keep_audio) and args.retake is None:
        raise ValueError("--keep-video and --keep-audio go with --retake (what of the retaken clip to keep); drop "
                         "them or add --retake")
    if args.dub is not None:
        return _dub_request(args)
    auto = auto_frames(args)
    if auto is not None and (args.retake is not None or args.video is not None):
        raise ValueError(f"--frames auto with {'--retake' if args.retake is not None else '--video'}: the clip's "
                         "length comes from the file; drop --frames auto (and --auto-duration)")
    if args.retake is not None:
        return _retake_request(args)
    if args.video is not None:
        return _video_request(args)
    if args.replace_sound:
        raise ValueError("--replace-sound goes with --video (a video whose sound is replaced); drop it or add --video")
    dfr = _dfr_settings(args)
    # a checkpoint's release is read from its header after the file checks; every release has the same sizes so far
    width, height, frames = RELEASES[demo_version(args)].default_size(args.checkpoint is None, args.mode != "one-stage")
    frames = frames if auto is not None else args.frames or frames  # auto: a placeholder until predicted
    return Request(
        prompt=args.prompt, negative_prompt=args.negative_prompt, width=args.width or width,
        height=args.height or height, frames=frames, fps=24.0 if args.fps is None else args.fps, steps=args.steps,
        seed=args.seed, mode=args.mode, images=tuple(image if auto else image.at(frames) for image in args.image),
        audio=args.audio, audio_only=args.audio_only, controls=control_conditions(args), auto_frames=auto, dfr=dfr)


def auto_frames(args: argparse.Namespace) -> AutoFrames | None:
    """--frames auto (or --auto-duration alone): the predicted length's bounds; None for a frame count."""
    if args.auto_duration is not None and args.frames not in (None, "auto"):
        raise ValueError(f"--auto-duration bounds the predicted length and --frames {args.frames} gives one: drop "
                         "one of them (--frames auto predicts it)")
    if args.frames != "auto" and args.auto_duration is None:
        return None
    return AutoFrames() if args.auto_duration is None else AutoFrames(*args.auto_duration)


def _dfr_settings(args: argparse.Namespace) -> DFR | None:
    """--mode dfr's settings (--temporal-rounds, --detailing-lora); ValueError for them without --mode dfr."""
    if args.mode != "dfr":
        given = [flag for flag, value in (("--temporal-rounds", args.temporal_rounds),
                                          ("--detailing-lora", args.detailing_lora),
                                          ("--temporal-upsampler", args.temporal_upsampler)) if value is not None]
        if given:
            raise ValueError(f"{', '.join(given)} go with --mode dfr; add it or drop them")
        return None
    path, strength = args.detailing_lora or (None, 1.0)
    return DFR(args.temporal_rounds or 0, path, strength)


def _hdr_request(args: argparse.Namespace) -> Request:
    """HDR: the SDR video made HDR (`hdr_pipeline`); size and rate default to the video's, frames to the most 8k+1
    it holds. What HDR cannot take is refused naming the flag."""
    if len(args.hdr) > 2:
        raise ValueError(f"--hdr takes VIDEO [STRENGTH], got {len(args.hdr)} values: {' '.join(args.hdr)}")
    try:
        strength = float(args.hdr[1]) if len(args.hdr) == 2 else 1.0
    except ValueError:
        raise ValueError(f"--hdr VIDEO STRENGTH: the strength must be a number in [0, 1], got {args.hdr[1]!r}"
                         ) from None
    taken = {"--image": args.image, "--audio": args.audio, "--control": args.control, "--video": args.video,
             "--retake": args.retake, "--audio-only": args.audio_only, "--duration": args.duration}
    if given := [flag for flag, value in taken.items() if value]:
        raise ValueError(f"--hdr makes its video HDR and takes no {', '.join(given)}; drop them")
    if args.mode not in ("one-stage", "hdr"):
        raise ValueError(f"--hdr runs its own two stages (a distilled --checkpoint); drop --mode {args.mode}")
    info = video_info(args.hdr[0])  # ValueError naming the fix for a missing or damaged file
    frames = args.frames or max(1, (info.frames - 1) // 8 * 8 + 1)
    return Request(prompt=args.prompt, width=args.width or info.width, height=args.height or info.height,
                   frames=frames, fps=info.fps if args.fps is None else args.fps, steps=args.steps, seed=args.seed,
                   mode="hdr", hdr=HDR(args.hdr[0], strength, args.hdr_high_quality))


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


def _video_request(args: argparse.Namespace) -> Request:
    """Sound for a video: the clip is the file's (a --width, --height, --frames or --fps that differs is refused)."""
    if args.control:
        raise ValueError("--control guides a generated video and --video keeps a given one; drop one of them")
    info = video_info(args.video)  # ValueError naming the fix for a missing, damaged or stream-less file
    if info.has_sound and not args.replace_sound:
        raise ValueError(f"video {args.video} already has sound; --video generates the sound of a silent video. Add "
                         "--replace-sound to replace it with a generated one, or strip it first: ffmpeg -i "
                         f"{Path(args.video).name} -an -c:v copy silent.mp4")
    _check_clip_flags(args, info, "--video")
    return Request(prompt=args.prompt, negative_prompt=args.negative_prompt, width=info.width, height=info.height,
                   frames=info.frames, fps=info.fps, steps=args.steps, seed=args.seed, mode=args.mode,
                   images=tuple(image.at(info.frames) for image in args.image), audio=args.audio,
                   video_input=VideoCondition(args.video))


def _retake_request(args: argparse.Namespace) -> Request:
    """A retake: the clip is the file's (a --width, --height, --frames or --fps that differs is refused)."""
    if args.video is not None or args.replace_sound:
        raise ValueError("--retake regenerates part of a video and --video (--replace-sound) the sound of a whole "
                         "one; give one of them (--retake PATH:0:END --keep-video regenerates the sound alone)")
    path, start, end = args.retake
    info = video_info(path)  # ValueError naming the fix for a missing, damaged or stream-less file
    _check_clip_flags(args, info, "--retake")
    return Request(prompt=args.prompt, negative_prompt=args.negative_prompt, width=info.width, height=info.height,
                   frames=info.frames, fps=info.fps, steps=args.steps, seed=args.seed, mode=args.mode,
                   images=tuple(image.at(info.frames) for image in args.image), audio=args.audio,
                   retake=Retake(path, start, end, regenerate_video=not args.keep_video,
                                 regenerate_audio=not args.keep_audio))


def _dub_request(args: argparse.Namespace) -> Request:
    """Dub-It: the clip's frames (floored to 8k+1) and fps, the distilled pipeline, the IC-LoRA's downscale."""
    if len(args.dub) > 2:
        raise ValueError(f"--dub takes CLIP [STRENGTH], got {len(args.dub)} values; e.g. --dub talk.mp4 0.9")
    try:
        strength = float(args.dub[1]) if len(args.dub) == 2 else 1.0
    except ValueError:
        raise ValueError(f"--dub STRENGTH must be a number in [0, 1], got {args.dub[1]!r}") from None
    for flag, given in (("--retake", args.retake), ("--video", args.video), ("--duration", args.duration),
                        ("--audio", args.audio)):
        if given is not None:
            raise ValueError(f"--dub re-voices its clip from the clip's own sound and frames, and {flag} is given; "
                             f"drop {flag}")
    if args.control:
        raise ValueError("--dub's clip is its IC-LoRA reference video; drop --control")
    if args.mode == "two-stage":
        raise ValueError("--dub runs the distilled pipeline (a distilled checkpoint, 8 + 3 steps), as the reference; "
                         "drop --mode two-stage")
    ic = [path for path, _ in args.lora if lora_reference_scale(path) is not None]
    if len(ic) != 1:
        raise ValueError(f"--dub needs the Dub-It IC-LoRA (a LoRA whose metadata states a reference_downscale_factor) "
                         f"given with --lora, exactly one such file; got {len(ic)}" + (f" ({', '.join(ic)})" if ic else
                                                                                        ""))
    dub = Dub(args.dub[0], strength, lora_reference_scale(ic[0]))
    info = dub.info()  # ValueError naming the fix for a missing, damaged or stream-less file
    for flag, value, own in (("--frames", args.frames, info.frames), ("--fps", args.fps, info.fps)):
        if value is not None and value != own:
            raise ValueError(f"{flag} {value:g} differs from the clip's {own:g}; --dub dubs the clip's first 8k+1 "
                             f"frames at its fps: drop {flag}")
    width, height, _ = RELEASES[demo_version(args)].default_size(args.checkpoint is None, True)
    return Request(prompt=args.prompt, width=args.width or width, height=args.height or height, frames=info.frames,
                   fps=info.fps, steps=args.steps, seed=args.seed, mode="distilled",
                   images=tuple(image.at(info.frames) for image in args.image), dub=dub)


def _check_clip_flags(args: argparse.Namespace, info, option: str) -> None:
    given = {"--width": (args.width, info.width), "--height": (args.height, info.height),
             "--frames": (args.frames, info.frames), "--fps": (args.fps, info.fps)}
    for flag, (value, own) in given.items():
        if value is not None and value != own:
            raise ValueError(f"{flag} {value:g} differs from the video's {own:g}; with {option} the clip is the "
                             f"file's ({info.width}x{info.height}, {info.frames} frames at {info.fps:g} fps): drop "
                             f"{flag}")


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


def demo_version(args: argparse.Namespace) -> str:
    """The demo model's structure: --version, else the default release."""
    return args.version or DEFAULT_VERSION.value


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


def predict_clip_length(args: argparse.Namespace, request: Request, files: ModelFiles) -> Request:
    """--frames auto: the prompt encoded and the length predicted by the duration head before anything else loads,
    so that the memory plan and the memory checks are made for the clip chosen (the run encodes the prompt again
    with its models); printed with the head's raw seconds. The request as it is otherwise."""
    if request.auto_frames is None:
        return request
    dtype = DTYPES[args.dtype] if args.dtype else None
    device = launch.local_device(args.device) if launch.ranks() > 1 else args.device
    encoder, head = files.load_text(device, dtype)
    positive, _ = encode_request(request, encoder, files.transformer_config())
    seconds = predict_seconds(head, positive, request.audio_only)
    del encoder, head, positive
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()  # Gemma's memory back before the plan counts the free memory
    resolved = with_length(request, seconds)
    if launch.is_main():
        print(f"duration head: {seconds:.2f} s predicted -> {resolved.frames} frames ({resolved.seconds:.2f} s at "
              f"{resolved.fps:g} fps; bounds {request.auto_frames.min_seconds:g}..{request.auto_frames.max_seconds:g} "
              "s)")
    return resolved


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


class ProgressBars:
    """One tqdm bar per stage, on stderr."""

    def __init__(self) -> None:
        self.bar, self.stage = None, None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != self.stage:
            self.close()
            self.bar, self.stage = tqdm(total=total, desc=stage, unit="step", file=sys.stderr), stage
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def generate_command(argv: list[str]) -> int:
    """Exit status 0, or 2 with the fix on stderr for a bad request or file (checked before any model work)."""
    args = parse_args(argv)
    try:
        run(args)
    except (LTX2Error, ValueError) as exc:
        launch.report_refusal(f"error: {exc}")  # every rank finds the same problem: rank 0 says it
        return 2
    return 0


def run(args: argparse.Namespace) -> None:
    request = build_request(args)
    files = ModelFiles(args.checkpoint, args.text_encoder, args.upsampler, args.distilled_lora, tuple(args.lora),
                       demo_version(args), args.fp8, args.vae, args.audio_vae,
                       controls=bool(request.controls) or request.mode == "hdr", text_projection=args.text_projection,
                       fp8_matmul=args.fp8_matmul, duration_head=args.duration_head,
                       temporal_upsampler=args.temporal_upsampler).resolved(files_mode(request))
    request = check_early(args, request, files)
    request = predict_clip_length(args, request, files)
    plan = memory_plan(args, request, files)
    parallel = layout(args).world_size > 1 or launch.ranks() > 1
    if not parallel:
        check_memory(args, request, files.model_sizes(DTYPES[args.dtype] if args.dtype else None), plan)
    try:
        result = _generate(args, request, files, parallel, plan)
    finally:
        if parallel:
            launch.leave()
    if result is not None:
        _write(args, result)


def _generate(args: argparse.Namespace, request: Request, files: ModelFiles, parallel: bool,
              plan: MemoryPlan | None) -> Generation | None:
    """Loads the models (this rank's shard of the transformer under torchrun) and generates; None on ranks that do
    not decode."""
    device = launch.local_device(args.device) if parallel else args.device
    mesh = launch.join(layout(args), device) if parallel else None
    say = print if launch.is_main() else (lambda *_: None)
    say(f"model: {files.label}" + (f"; cfg {args.cfg_parallel} × sp {args.sp} × tp {args.tp}" if parallel else ""))
    start = time.perf_counter()
    if plan is not None:
        say(plan.describe())
    models = files.load(device, DTYPES[args.dtype] if args.dtype else None,
                        parallelize=launch.tensor_parallel_for(mesh, layout(args)) if parallel else None, plan=plan)
    distribution = launch.finish(models.transformer, mesh, layout(args)) if parallel else Distribution()
    if parallel:  # the prompts encoded across the ranks (issue 38, item 2)
        models, distribution, text = spread_text(request, models, distribution)
        say(text or "text encoder: rank 0 encodes the prompts")
    config = files.transformer_config()  # the attention checked again with the dtype the transformer computes in
    set_attention(args.attention, device, models.transformer.scale_shift_table.dtype,
                  (config.video.head_dim, config.audio.head_dim))
    if args.compile:
        compile_blocks(models.transformer)
    what = (f"text to audio, {request.seconds:.2f} s" if request.audio_only else
            f"{request.mode}, {request.width}x{request.height}, {request.frames} frames at {request.fps:g} fps")
    if request.long:
        what += (f" in {request.windows.count(request.frames)} windows of {request.windows.window} frames sharing "
                 f"{request.windows.overlap}")
    say(f"loaded in {time.perf_counter() - start:.1f} s; {what}, seed {request.seed}")
    if request.enhance_prompt and not parallel:  # shown before sampling (under torchrun: enhanced where encoded)
        request = enhance_request(request, models.prompt_encoder)
        say(f"enhanced prompt: {request.prompt}")
    if not parallel:
        dtype = models.transformer.scale_shift_table.dtype  # never quantised: the compute dtype
        check_memory(args, request, ModelSizes.of(files.transformer_config(), dtype, models.decoders,
                                                  models.upsampler), plan)
    progress = None if args.no_progress or not launch.is_main() else ProgressBars()
    try:
        passes_per_forward = args.passes_per_forward or (plan.passes_per_forward if plan is not None else None)
        if request.mode == "hdr":
            positive = load_embeddings(args.text_embeddings, device) if args.text_embeddings else None
            sampler = LocalSampler(models.transformer, cuda_graphs=args.cuda_graphs,
                                   passes_per_forward=passes_per_forward)
            return generate_hdr(request, models, sampler=sampler, positive=positive,
                                tiling=plan.tiling() if plan is not None else TilingConfig())
        run_request = generate_long if request.windows is not None else generate
        return run_request(request, models, progress, cuda_graphs=args.cuda_graphs,
                        passes_per_forward=passes_per_forward, distribution=distribution,
                        tiling=plan.tiling() if plan is not None else TilingConfig())
    finally:
        if progress is not None:
            progress.close()


def load_embeddings(path: str, device: str) -> TextEmbeddings:
    """--text-embeddings: the reference's file of `video_context` and `audio_context` (batch 1)."""
    file = read_header(path, "text embeddings")
    missing = {"video_context", "audio_context"} - set(file.tensors)
    if missing:
        raise ValueError(f"--text-embeddings {path} lacks {', '.join(sorted(missing))}; give a .safetensors of "
                         "video_context and audio_context (as ltx-pipelines' HDR IC-LoRA reads)")
    with safe_open(path, framework="pt", device="cpu") as f:
        video, audio = (f.get_tensor(name) for name in ("video_context", "audio_context"))
    return TextEmbeddings(*(t[None] if t.dim() == 2 else t for t in (video, audio))).to(device)


def _write(args: argparse.Namespace, result: Generation) -> None:
    start = time.perf_counter()
    if isinstance(result, HdrGeneration):
        paths = result.save(args.output)
        frames = result.linear
        print(f"wrote {len(paths) - 1} EXR frames {frames.shape[2]}x{frames.shape[1]} (linear Rec.709, half float) "
              f"and {paths[-1]} (sRGB preview) at {result.fps:g} fps into {args.output} (written in "
              f"{time.perf_counter() - start:.1f} s)")
        return
    path = result.save(args.output)
    if args.tensors:
        frames = {} if result.frames is None else {"frames": result.frames.contiguous()}
        save_file(frames | {"waveform": result.waveform.contiguous()}, args.tensors)
    seconds = result.waveform.shape[-1] / result.sample_rate
    sound = "the input sound" if args.audio is not None else "stereo audio"
    if result.frames is None:
        print(f"wrote {path}: {seconds:.2f} s of stereo audio at {result.sample_rate} Hz "
              f"(written in {time.perf_counter() - start:.1f} s)")
        return
    print(f"wrote {path}: {result.frames.shape[0]} frames {result.frames.shape[2]}x{result.frames.shape[1]} at "
          f"{result.fps:g} fps, {seconds:.2f} s of {sound} at {result.sample_rate} Hz "
          f"(written in {time.perf_counter() - start:.1f} s)")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "generate":
        argv = argv[1:]
    return generate_command(argv)


if __name__ == "__main__":
    sys.exit(main())
