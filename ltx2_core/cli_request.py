"""The `Request` a command line asks for (`build_request`): the clip, mode, images, audio and controls of a plain
generation, or the clip of a file (--video, --retake, --dub, --hdr) with the flags that would contradict it refused
naming the flag; step caching, the prompt enhancer, the sampler and a long clip's windows on top; ValueError naming the
fix for any flag that does not fit, before any model work."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from ltx2_core.loader.lora import lora_reference_scale, reference_downscale_factor
from ltx2_core.conditioning.control import ControlCondition
from ltx2_core.conditioning.dub import Dub
from ltx2_core.conditioning.retake import Retake
from ltx2_core.conditioning.video import VideoCondition
from ltx2_core.releases import DEFAULT_VERSION, RELEASES
from ltx2_core.model.text.enhance import system_prompt
from ltx2_core.duration import AutoFrames
from ltx2_core.request import Request
from ltx2_core.sampling.cache import CacheSettings, print_record
from ltx2_core.video_io import video_info
from ltx2_core.windows import DEFAULT_OVERLAP, DEFAULT_WINDOW, Windows, frames_for
from ltx2_core.dfr import DFR
from ltx2_core.hdr import HDR


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


def demo_version(args: argparse.Namespace) -> str:
    """The demo model's structure: --version, else the default release."""
    return args.version or DEFAULT_VERSION.value
