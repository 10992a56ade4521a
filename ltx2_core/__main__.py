"""Command line: `python -m ltx2_core generate [options]` (also the default without a subcommand).

Text to video + audio with the one-stage, two-stage or distilled pipeline, written to an mp4 (H.264 + AAC stereo).
Without --checkpoint it runs a tiny random-weight DEMO model built in code (every component at toy size: the
result is noise with noise for sound, at the requested size and length), so the whole path runs on any machine.
With --checkpoint it loads the official LTX-2 / LTX-2.3 single-file checkpoint with --text-encoder (Gemma 3 12B),
or LTX-2.5's files: the transformer file with --text-encoder (Gemma 4 12B with the text projection), --vae and
--audio-vae, or the folder holding them (ComfyUI's models folder or one flat folder, each file found by its header);
and for two-stage --upsampler and --distilled-lora. Every argument and file is checked before any model work.

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
--duration SECONDS makes a clip of any length: longer than one --window (8k+1 frames, default 121) it is sampled as
windows sharing --overlap frames (a multiple of 8, default 24), each holding the previous one's last frames of video
and sound, with --window-prompt giving window by window prompts; the windows are joined and decoded as one clip
(docs/video_in/long_video.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
from safetensors.torch import save_file
from tqdm import tqdm

from ltx2_core import cli_values as values
from ltx2_core.compile import compile_blocks
from ltx2_core.errors import LTX2Error
from ltx2_core.model_files import ModelFiles
from ltx2_core.parallel import ParallelConfig
from ltx2_core.loader.lora import reference_downscale_factor
from ltx2_core.conditioning.control import ControlCondition
from ltx2_core.conditioning.images import DEFAULT_IMAGE_CRF
from ltx2_core.conditioning.retake import Retake
from ltx2_core.conditioning.video import VideoCondition
from ltx2_core.releases import DEFAULT_VERSION, RELEASED_STEPS, RELEASES
from ltx2_core.quant.policy import FP8_MODES
from ltx2_core.media import aac_sample_rates
from ltx2_core.memory.plan import GB, MemoryPlan
from ltx2_core.model.video_vae.tiling import TilingConfig
from ltx2_core.parallel import launch
from ltx2_core.pipeline import Distribution, Generation, check_stg_blocks, generate, guidance_for
from ltx2_core.request import DEFAULT_NEGATIVE_PROMPT, MODES, ONE_GPU, Request
from ltx2_core.sampling.guidance import active_passes
from ltx2_core.sampling import GuidanceParams
from ltx2_core.stages import AUDIO_SUFFIXES
from ltx2_core.video_io import video_info
from ltx2_core.long_video import generate_long
from ltx2_core.windows import DEFAULT_OVERLAP, DEFAULT_WINDOW, Windows, frames_for

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ltx2_core generate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompt", default="A cat walks along the beach at sunset while waves roll in.")
    p.add_argument("--negative-prompt", help="default: the release's (LTX-2.5 adds five tags in front of "
                   f"LTX-2's and 2.3's: {DEFAULT_NEGATIVE_PROMPT[:40]}…)")
    p.add_argument("--mode", choices=MODES, default="one-stage")
    p.add_argument("--width", type=int, help="pixels, multiple of 32 (64 for two-stage / distilled)")
    p.add_argument("--height", type=int, help="pixels, multiple of 32 (64 for two-stage / distilled)")
    p.add_argument("--frames", type=int, help="pixel frames, 8k+1 (default 121; demo 17)")
    p.add_argument("--fps", type=float, help="frames per second (default 24; with --video: the file's)")
    p.add_argument("--steps", type=int, help=f"stage-1 steps (default {RELEASED_STEPS}; distilled: 8)")
    p.add_argument("--seed", type=int, default=0)
    g = p.add_argument_group("guidance (default: the release's values; cfg/modality 1 and stg/rescale 0 switch off)")
    for flag, help_text in (("cfg", "classifier-free guidance scale"), ("stg", "spatio-temporal guidance scale"),
                            ("rescale", "rescale of the guided prediction (0..1)"),
                            ("modality", "modality-isolation (a2v / v2a) guidance scale")):
        g.add_argument(f"--{flag}", type=float, help=f"video {help_text}")
        g.add_argument(f"--audio-{flag}", type=float, help=f"audio {help_text}")
    g.add_argument("--stg-blocks", type=values.stg_blocks, help="video STG blocks, e.g. 29 or 28,29")
    g.add_argument("--audio-stg-blocks", type=values.stg_blocks, help="audio STG blocks")
    m = p.add_argument_group("model files (default: the tiny random-weight demo model)")
    m.add_argument("--checkpoint", help="official LTX-2 / LTX-2.3 .safetensors (dev; distilled for --mode "
                   "distilled); or LTX-2.5's transformer ltx-2.5-22b-{dev,distilled}-transformer-bf16.safetensors "
                   "(with --text-encoder, --vae, --audio-vae); or a folder holding LTX-2.5's files (ComfyUI's models "
                   "folder with diffusion_models/ text_encoders/ vae/ latent_upscale_models/ loras/, or one flat "
                   "folder): each file found by its header, the flags below pick where it holds two")
    m.add_argument("--text-encoder", help="Gemma 3 12B for LTX-2 / 2.3: gemma_3_12B_it*.safetensors or a Hugging "
                   "Face folder; LTX-2.5: gemma4-12b-with-proj-ltx-2.5-bf16.safetensors")
    m.add_argument("--vae", help="LTX-2.5's video VAE: ltx-2.5-video-vae-bf16.safetensors (the diffusion decoder, the "
                   "release's default quality) or ltx-2.5-video-vae-conv-bf16.safetensors (the convolutional decoder: "
                   "faster, less memory; its encoder also serves --image); with an LTX-2 / 2.3 checkpoint it replaces "
                   "the bundled video VAE")
    m.add_argument("--audio-vae", help="LTX-2.5's audio VAE and vocoder: ltx-2.5-audio-vae-bf16.safetensors; with an "
                   "LTX-2 / 2.3 checkpoint it replaces the bundled ones")
    m.add_argument("--upsampler", help="ltx-2-spatial-upscaler-x2-*.safetensors, LTX-2.5: ltx-2.5-latent-spatial-"
                   "upscaler-x2-bf16-1.0.safetensors (two-stage, distilled)")
    m.add_argument("--distilled-lora", help="ltx-2-*-distilled-lora-*.safetensors, LTX-2.5: ltx-2.5-22b-distilled-"
                   "lora-450-bf16.safetensors (two-stage)")
    m.add_argument("--lora", action="append", default=[], type=values.lora, metavar="PATH[:STRENGTH]",
                   help="a LoRA to fuse (repeatable; strength default 1)")
    m.add_argument("--version", choices=[v.value for v in RELEASES], default=DEFAULT_VERSION.value,
                   help="structure of the demo model")
    p.add_argument("--image", action="append", default=[], type=values.image, metavar="PATH[:FRAME[:STRENGTH[:CRF]]]",
                   help="an image held at pixel frame FRAME (default 0: image-to-video; -1: the last frame; others "
                        "are keyframes) with STRENGTH (default 1) after an H.264 round trip at CRF (default "
                        f"{DEFAULT_IMAGE_CRF}, 0: none); repeatable")
    p.add_argument("--audio", type=values.audio, metavar="PATH[:START[:STRENGTH]]",
                   help="audio-to-video: the sound (any audio file, or a video file's sound track) from START seconds "
                        "(default 0) for the clip's length, held with STRENGTH (default 1: exactly, as Lightricks' "
                        "pipeline); the mp4 carries this sound, not a re-decoded copy")
    p.add_argument("--video", metavar="PATH",
                   help="sound for a silent video: width, height, frames and fps are taken from the file (sizes "
                        "multiples of 32, 8k+1 ≥ 9 frames), its frames held while the sound is generated; --mode "
                        "one-stage (guided) or distilled (8 steps, one stage)")
    p.add_argument("--control", action="append", default=[], type=values.control, metavar=values.CONTROL_FORM,
                   help="IC-LoRA control: a depth, pose or edge video (its first --frames frames) guiding the "
                        "generation with STRENGTH (default 1: its tokens kept clean), through the IC-LoRA given with "
                        "--lora (encoded at the size its reference_downscale_factor asks for; two-stage: in stage 1, "
                        "the IC-LoRA fused for stage 1 only); ATTENTION (default 1) weighs the attention between the "
                        "control and the video (0: none), times MASK, a grayscale video (black 0, white 1; its "
                        "first --frames frames) of where the control applies; repeatable")
    p.add_argument("--retake", type=values.span, metavar="PATH:START:END",
                   help="regenerate [START, END) seconds of a video (its frames and its sound, if any) with the "
                        "prompt and keep the rest: the clip is the file's (sizes multiples of 32, 8k+1 ≥ 9 frames); "
                        "--mode one-stage (guided) or distilled (8 steps, one stage)")
    p.add_argument("--keep-video", action="store_true", help="with --retake: keep the video whole (only the sound "
                   "of the span is regenerated)")
    p.add_argument("--keep-audio", action="store_true", help="with --retake: keep the sound whole (only the frames "
                   "of the span are regenerated)")
    p.add_argument("--replace-sound", action="store_true",
                   help="with --video: accept a file that already has sound (the generated sound replaces it)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtype", choices=sorted(DTYPES), help="default: float32 demo / the file's dtype")
    p.add_argument("--fp8", choices=FP8_MODES, default="auto",
                   help="transformer weights: auto keeps an fp8 file in fp8 and a bf16 file in --dtype; quantize: a "
                        "bf16 file's block linears to fp8 at load; dequantize: an fp8 file to --dtype")
    p.add_argument("--memory", choices=("auto", "resident", "stream"), default="auto",
                   help="auto: on CUDA (or with --memory-budget) plan what stays on the device from its free memory "
                        "and what is held in RAM, streaming the transformer blocks that do not fit; stream: every "
                        "block streamed (the least device memory); resident: everything on the device")
    p.add_argument("--memory-budget", type=float, metavar="GB",
                   help="plan for this much device memory instead of what is free (e.g. to leave room)")
    p.add_argument("--compile", action="store_true", help="torch.compile every transformer block (CUDA)")
    p.add_argument("--cuda-graphs", action="store_true", help="capture each denoising step as a CUDA graph (CUDA)")
    p.add_argument("--passes-per-forward", type=values.positive_int,
                   help="guidance passes per transformer forward (default: all 4 in one; 1 or 2 need less memory)")
    d = p.add_argument_group("several GPUs: run under `torchrun --nproc-per-node N` with cfg-parallel·sp·tp = N")
    d.add_argument("--cfg-parallel", type=values.positive_int, default=1,
                   help="guidance passes spread over this many ranks (CFG-parallel; --cfg is the guidance scale)")
    d.add_argument("--sp", type=values.positive_int, default=1,
                   help="Ulysses sequence parallelism over the video tokens")
    d.add_argument("--tp", type=values.positive_int, default=1, help="tensor parallelism (divides the weights)")
    w = p.add_argument_group("long video: a clip longer than one window, as overlapping windows that continue each "
                             "other (video and sound)")
    w.add_argument("--duration", type=float, metavar="SECONDS",
                   help="the clip's length (instead of --frames): the fewest 8k+1 frames lasting SECONDS at --fps; "
                        "longer than one --window it is sampled window by window, each holding the previous one's "
                        "last --overlap frames of video and sound, and decoded as one clip")
    w.add_argument("--window", type=int, metavar="FRAMES",
                   help=f"pixel frames per window, 8k+1 ≥ 17 (default {DEFAULT_WINDOW}: 5 s at 24 fps; the "
                        "memory plan says how long a window the device allows)")
    w.add_argument("--overlap", type=int, metavar="FRAMES",
                   help=f"pixel frames neighbouring windows share, a multiple of 8 below the window by more than 8 "
                        f"(default {DEFAULT_OVERLAP}: 1 s at 24 fps)")
    w.add_argument("--window-prompt", action="append", default=[], metavar="TEXT",
                   help="the prompt of the next window (repeatable, in order; the last repeats for the rest; "
                        "default: --prompt for every window)")
    p.add_argument("--audio-only", action="store_true",
                   help="text to audio: the sound of --frames at --fps alone, no video (one-stage, one GPU); "
                        "written as .wav (default ltx2_output.wav), .flac, .m4a or .mp4 by --output's suffix")
    p.add_argument("--output", help="file to write: an mp4 (default ltx2_output.mp4); with --audio-only .wav, .flac, "
                                    ".m4a or .mp4")
    p.add_argument("--tensors", help="also write the decoded frames and waveform (float32) to this .safetensors")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = p.parse_args(argv)
    if args.output is None:
        args.output = "ltx2_output.wav" if args.audio_only else "ltx2_output.mp4"
    return args


def control_conditions(args: argparse.Namespace) -> tuple[ControlCondition, ...]:
    """The --control videos at the downscale factor the --lora files state (conflicts refused naming both)."""
    if not args.control:
        return ()
    if not args.lora:
        raise ValueError("--control guides the generation through an IC-LoRA; add it with --lora PATH (e.g. "
                         "ltx-2-19b-ic-lora-depth-control.safetensors), or drop --control")
    factor = reference_downscale_factor([path for path, _ in args.lora])
    return tuple(control._replace(downscale=factor) for control in args.control)
def build_request(args: argparse.Namespace) -> Request:
    request = _one_request(args)
    if args.duration is None:
        if args.window is not None or args.overlap is not None or args.window_prompt:
            raise ValueError("--window, --overlap and --window-prompt cut a long clip: give its length with "
                             "--duration SECONDS, or drop them")
        return request
    return replace(request, frames=frames_for(args.duration, request.fps), windows=Windows(
        DEFAULT_WINDOW if args.window is None else args.window,
        DEFAULT_OVERLAP if args.overlap is None else args.overlap, tuple(args.window_prompt)))


def _one_request(args: argparse.Namespace) -> Request:
    if args.duration is not None:
        for flag, given in (("--frames", args.frames), ("--retake", args.retake), ("--video", args.video)):
            if given is not None:
                raise ValueError(f"--duration makes a long clip window by window and {flag} is given: give "
                                 f"--duration or {flag}" + (" (a file's clip is sampled in one window)"
                                                            if flag != "--frames" else ""))
    if (args.keep_video or args.keep_audio) and args.retake is None:
        raise ValueError("--keep-video and --keep-audio go with --retake (what of the retaken clip to keep); drop "
                         "them or add --retake")
    if args.retake is not None:
        return _retake_request(args)
    if args.video is not None:
        return _video_request(args)
    if args.replace_sound:
        raise ValueError("--replace-sound goes with --video (a video whose sound is replaced); drop it or add --video")
    # a checkpoint's release is read from its header after the file checks; every release has the same sizes so far
    width, height, frames = RELEASES[args.version].default_size(args.checkpoint is None, args.mode != "one-stage")
    frames = args.frames or frames
    return Request(
        prompt=args.prompt, negative_prompt=args.negative_prompt, width=args.width or width,
        height=args.height or height, frames=frames, fps=24.0 if args.fps is None else args.fps, steps=args.steps,
        seed=args.seed, mode=args.mode, images=tuple(image.at(frames) for image in args.image), audio=args.audio,
        audio_only=args.audio_only, controls=control_conditions(args))


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
    if request.mode == "distilled":
        return request
    return replace(request, video_guidance=_override(video, args, ""), audio_guidance=_override(audio, args, "audio_"))


def _override(params: GuidanceParams, args: argparse.Namespace, prefix: str) -> GuidanceParams:
    names = ("cfg", "stg", "rescale", "modality", "stg_blocks")
    given = {name: getattr(args, prefix + name) for name in names if getattr(args, prefix + name) is not None}
    return replace(params, **given)  # GuidanceParams checks the values (≥ 0)


def check_early(args: argparse.Namespace, request: Request, files: ModelFiles) -> Request:
    """Every check that needs no model: the request, the files, the guidance; returns the complete request."""
    request.check()
    files.check(files_mode(request))
    request = with_guidance(request, args, files)
    if request.audio_only and not args.output.lower().endswith(AUDIO_SUFFIXES):
        raise ValueError(f"--audio-only writes the sound alone: give --output a {', '.join(AUDIO_SUFFIXES)} name, got "
                         f"{args.output}")
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
    if request.audio is not None and not files.has_audio_encoder():
        raise ValueError(f"--audio needs the audio VAE encoder, and {files.label} has none (a file stripped of it); "
                         "use the released checkpoint (LTX-2.5: its audio VAE file) or drop --audio")
    check_stg_blocks(request, files.transformer_config())
    if not Path(args.output).resolve().parent.is_dir():
        raise ValueError(f"output folder {Path(args.output).parent} does not exist; create it or pick another --output")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("--device cuda but no CUDA GPU is visible; use --device cpu")
    if (args.compile or args.cuda_graphs) and not args.device.startswith("cuda"):
        raise ValueError("--compile and --cuda-graphs are CUDA options (off on the CPU); drop them or use --device "
                         "cuda")
    config = files.transformer_config()
    layout(args).check(world_size=launch.ranks(), heads=(config.video.heads, config.audio.heads),
                       devices=torch.cuda.device_count() if args.device.startswith("cuda") else None,
                       passes=len(active_passes(*guidance_for(request, config))))
    if args.memory_budget is not None and not args.memory_budget > 0:
        raise ValueError(f"--memory-budget must be a positive number of GB, got {args.memory_budget}")
    return request


def files_mode(request: Request) -> str:
    """The mode whose files a request needs: sound for a video and a retake run one stage whatever its schedule (no upsampler,
    no LoRA), so it needs the one-stage files."""
    return "one-stage" if request.one_stage_input else request.mode


def memory_plan(args: argparse.Namespace, request: Request, files: ModelFiles) -> MemoryPlan | None:
    """The plan of what stays on the device (before any model loads), or None when everything stays: on the CPU
    without a budget, with --memory resident, or under tensor parallelism (whose shards are planned per rank)."""
    if layout(args).world_size > 1 or args.memory == "resident":
        return None
    if args.cuda_graphs or args.compile:
        raise ValueError(f"--memory {args.memory} may stream blocks, which --compile and --cuda-graphs do not "
                         "support; add --memory resident")
    config = files.transformer_config()
    budget = int(args.memory_budget * GB) if args.memory_budget else None
    frames = min(request.frames, request.windows.window) if request.windows is not None else request.frames
    return files.plan(args.device, frames=frames, height=request.height, width=request.width,
                      passes=len(active_passes(*guidance_for(request, config))), two_stage=request.two_stage,
                      fps=request.fps, images=len(request.images) + encoded_frames(request), dtype=DTYPES[args.dtype] if args.dtype else None,
                      memory=args.memory, budget=budget, source=None if budget else f"free on {args.device}")


def encoded_frames(request: Request) -> int:
    """Frames the video encoder takes besides the images: a held video's (sound for a video, a retake) and the
    controls', each counted as an image (an estimate: each clip is encoded in one piece)."""
    held = request.frames if request.one_stage_input else 0
    return held + request.frames * len(request.controls)  # the controls at their (smaller) size, counted in full


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
                       args.version, args.fp8, args.vae, args.audio_vae,
                       controls=bool(request.controls)).resolved(files_mode(request))
    request = check_early(args, request, files)
    plan = memory_plan(args, request, files)
    parallel = layout(args).world_size > 1 or launch.ranks() > 1
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
    if args.compile:
        compile_blocks(models.transformer)
    what = (f"text to audio, {request.seconds:.2f} s" if request.audio_only else
            f"{request.mode}, {request.width}x{request.height}, {request.frames} frames at {request.fps:g} fps")
    if request.long:
        what += (f" in {request.windows.count(request.frames)} windows of {request.windows.window} frames sharing "
                 f"{request.windows.overlap}")
    say(f"loaded in {time.perf_counter() - start:.1f} s; {what}, seed {request.seed}")
    progress = None if args.no_progress or not launch.is_main() else ProgressBars()
    try:
        passes_per_forward = args.passes_per_forward or (plan.passes_per_forward if plan is not None else None)
        run_request = generate_long if request.windows is not None else generate
        return run_request(request, models, progress, cuda_graphs=args.cuda_graphs,
                        passes_per_forward=passes_per_forward, distribution=distribution,
                        tiling=plan.tiling() if plan is not None else TilingConfig())
    finally:
        if progress is not None:
            progress.close()


def _write(args: argparse.Namespace, result: Generation) -> None:
    start = time.perf_counter()
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
