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
import sys
import time

import torch
from safetensors.torch import save_file
from tqdm import tqdm

from ltx2_core.cli_args import DTYPES, parse_args
from ltx2_core.cli_checks import check_early, check_memory, files_mode, layout, memory_plan
from ltx2_core.cli_request import build_request, demo_version
from ltx2_core.compile import compile_blocks
from ltx2_core.errors import LTX2Error
from ltx2_core.model_files import ModelFiles
from ltx2_core.memory.estimates import GB
from ltx2_core.memory.footprint import ModelSizes
from ltx2_core.memory.plan import MemoryPlan
from ltx2_core.model.transformer.attention_select import set_attention
from ltx2_core.model.video_vae.tiling import TilingConfig
from ltx2_core.parallel import launch
from ltx2_core.parallel.auto_length import predict_across
from ltx2_core.parallel.text_load import load_text
from ltx2_core.duration import predict_seconds, with_length
from ltx2_core.pipeline import Distribution, Generation, generate
from ltx2_core.request import Request
from ltx2_core.long_video import generate_long
from ltx2_core.hdr_pipeline import HdrGeneration, generate_hdr
from ltx2_core.loader.safetensors_file import read_header
from ltx2_core.request_encoding import encode_request, enhance_request
from ltx2_core.stage_samplers import LocalSampler
from ltx2_core.types import TextEmbeddings
from safetensors import safe_open

def predict_clip_length(args: argparse.Namespace, request: Request, files: ModelFiles) -> Request:
    """--frames auto: the prompt encoded and the length predicted by the duration head before anything else loads,
    so that the memory plan and the memory checks are made for the clip chosen (the run encodes the prompt again
    with its models); printed with the head's raw seconds. Under torchrun the ranks join their group here and the
    encoder is spread over them as the run's is (`parallel.auto_length`). The request as it is otherwise."""
    if request.auto_frames is None:
        return request
    dtype = DTYPES[args.dtype] if args.dtype else None
    device = launch.local_device(args.device) if launch.ranks() > 1 else args.device
    if launch.ranks() > 1:
        launch.init_group(device)
        seconds = predict_across(request, files, device, dtype,
                                 budget=int(args.memory_budget * GB) if args.memory_budget else None)
    else:
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
    parallel = layout(args).world_size > 1 or launch.ranks() > 1
    try:  # under torchrun the group may be joined from --frames auto's prediction on
        request = predict_clip_length(args, request, files)
        plan = memory_plan(args, request, files)
        if not parallel:
            check_memory(args, request, files.model_sizes(DTYPES[args.dtype] if args.dtype else None), plan)
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
    dtype = DTYPES[args.dtype] if args.dtype else None
    models = files.load(device, dtype, parallelize=launch.tensor_parallel_for(mesh, layout(args)) if parallel else None,
                        plan=plan, text=not parallel)  # under torchrun: loaded last, each rank its text layout's part
    distribution = launch.finish(models.transformer, mesh, layout(args)) if parallel else Distribution()
    if parallel:  # the prompts encoded across the ranks (issue 38, item 2)
        models, distribution, text = load_text(request, files, models, distribution, device, dtype,
                                               budget=int(args.memory_budget * GB) if args.memory_budget else None)
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
