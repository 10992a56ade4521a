"""End to end on one GPU: LTX-2.3 two-stage, 768×512×121, the release's steps, prompt to mp4; the time of each part.

    python bench/end_to_end.py [--fp8] [--cache] [--cuda-graphs on|off|auto] [--out DIR]   # a CUDA GPU
    python bench/end_to_end.py --quick [--fp8] [--out DIR]                                  # CPU smoke run

The run users make (`python -m ltx2_core generate --mode two-stage`): the request as the command line builds it,
the pipeline's own parts in `generate`'s order (`encode_request`, `sample_request` with the two stages and the x2
upsampling, `decode`, `Generation.save`), and an H.264 + AAC mp4 written with PyAV. Every component has the released
structure and random weights made on the device (bench/e2e_models.py): the 48-block transformer, Gemma 3 12B and
the text projection, the video and audio VAE decoders, the vocoder, the x2 upsampler and the rank-384 distilled LoRA
(held on the host in fp32, as a file's; stage 2 fuses it and restores the weights after, as the pipeline does).

Parts (seconds, the device synchronised at each boundary; peak device memory within each): text (both prompts in one
Gemma pass), stage 1 (30 guided steps at 384×256), upsample, stage 2 (3 distilled steps at 768×512 with the LoRA
fused), video decode (tiled, into host memory), audio decode (audio VAE and vocoder), write (the mp4). Model building
is not timed. Memory: Gemma 3 12B (24 GB) and the 2.3 text projection (6 GB) would leave little room on an 80 GB
card beside the transformer (38 GB) and the rest, so the prompt encoder is built first, encodes, and is freed before
the transformer is built (as the memory plan frees it on a small card): the text part is the encode's compute, with
no weight traffic; --text-streamed streams Gemma's layers from host memory instead, as the command line's memory
plan runs it on CUDA. --fp8 quantises the blocks' linears on the device (`quant.policy.quantize_blocks`, what
--fp8 quantize loads). --cache turns on step caching (`ltx2_core.sampling.cache`, ComfyUI EasyCache's defaults) in both stages.
--warmup runs the path once, untimed, with one step a stage first.

--quick: the same code path on the CPU with the tiny demo models (`demo_models`) at 128×128×17. --divisor, --layers,
--gemma-layers and --text-tokens cut the released builders down for a CPU check of the GPU path. Writes
end_to_end_<variant>.json (and .mp4) under --out; prints a markdown table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

import e2e_models  # noqa: E402
from e2e_clock import GIB, Clock, TimedSampler  # noqa: E402

from ltx2_core.pipeline import (  # noqa: E402
    LocalSampler,
    check_request,
    encode_request,
    generator_on,
    guidance_for,
    sample_request,
)
from ltx2_core.quant.policy import quantize_blocks  # noqa: E402
from ltx2_core.releases import RELEASES, ModelVersion  # noqa: E402
from ltx2_core.request import Request  # noqa: E402
from ltx2_core.sampling.cache import CacheSettings  # noqa: E402
from ltx2_core.stages import decode  # noqa: E402

PROMPT = ("A red car drives through a rainy city at night; neon lights reflect on the wet street while the camera "
          "tracks alongside. Rain hisses on the asphalt and a distant siren rises and fades.")
PARTS = ("text", "stage 1", "upsample", "stage 2", "video decode", "audio decode", "write")
# sglang's LTX-2.3 two-stage 768×512×121 (issue 36): wall seconds on 4×H100 (59 GPU-seconds) and on 2×H200
ANCHORS = {"sglang 4×H100": (14.6, 59.0), "sglang 2×H200": (13.4, 26.8)}
# docs/performance.md, H100 bf16, LTX-2.3: an 8-block forward at 1,536 and 6,144 video tokens
H100_FORWARD_8 = {1536: 0.0643, 6144: 0.0758}


def estimate(stage1: int, stage2: int, warmup: bool) -> str:
    """A rough H100 time from the measured forwards (48 blocks = 6 × 8; stage 1's four passes one after another)."""
    one = 6 * H100_FORWARD_8[1536] * 4 * stage1
    two = 6 * H100_FORWARD_8[6144] * stage2
    fuse = 8.0  # the LoRA's fusion and the restore: ~36 GB of block weights each way between host and device
    total = one + two + fuse + 5
    return (f"rough H100 estimate (docs/performance.md forwards): stage 1 ≈ {one:.0f} s, stage 2 ≈ {two:.1f} s "
            f"+ LoRA fusion and restore ≈ {fuse:.0f} s, text + decode + write ≈ 5 s: ≈ {total:.0f} s, plus ≈ 30–60 s "
            "of imports and model building" + (" and ≈ 20 s of warm-up" if warmup else ""))


def step_cache(wanted: bool) -> CacheSettings | None:
    """Step caching's settings (ComfyUI's EasyCache defaults) when --cache is given, else None."""
    return CacheSettings() if wanted else None


def cache_kwargs(settings, records: list) -> dict:
    """The request's fields for the cache settings (`Request.cache`, every stage), its record going to `records`."""
    if settings is None:
        return {}
    return {"cache": replace(settings, report=records.append)}


def variant(args: argparse.Namespace) -> str:
    return "+".join([weights(args)] + (["cache"] * args.cache) + (
        [f"graphs-{args.cuda_graphs}"] if args.cuda_graphs != "auto" else []))


def released(args: argparse.Namespace) -> bool:
    """Whether the run has the released structure (not --quick, nothing cut down)."""
    return not args.quick and (args.divisor, args.layers, args.gemma_layers, args.text_tokens) == tuple(
        e2e_models.Structure())


def weights(args: argparse.Namespace) -> str:
    """The transformer's weights: fp8, or the compute dtype (bf16 on CUDA, fp32 on the CPU)."""
    return "fp8" if args.fp8 else "bf16" if args.device.type == "cuda" else "fp32"


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="the tiny demo models at 128×128×17 on the CPU: a smoke run")
    p.add_argument("--fp8", action="store_true", help="the blocks' linears quantised to fp8 on the device")
    p.add_argument("--cache", action="store_true", help="step caching in both stages (ComfyUI EasyCache's defaults)")
    p.add_argument("--cuda-graphs", choices=("on", "off", "auto"), default="auto",
                   help="capture each step as a CUDA graph (auto: the pipeline's default)")
    p.add_argument("--warmup", action="store_true", help="first an untimed run of one step a stage (a warm process, "
                   "as a server's; default: the first run, as the command line's)")
    p.add_argument("--text-streamed", action="store_true", help="Gemma's layers in host memory, streamed in while "
                   "encoding, as the command line's memory plan runs them on CUDA (default: resident, then freed)")
    p.add_argument("--passes-per-forward", type=int, help="guidance passes per forward (default: the pipeline's)")
    p.add_argument("--stage1-steps", type=int, help="cut stage 1 (default: the release's 30); stated in the output")
    p.add_argument("--stage2-steps", type=int, help="cut stage 2 (default: its 3); stated in the output")
    p.add_argument("--width", type=int, help="default 768 (quick: 128)")
    p.add_argument("--height", type=int, help="default 512 (quick: 128)")
    p.add_argument("--frames", type=int, help="default 121 (quick: 17)")
    p.add_argument("--divisor", type=int, default=1, help="released widths ÷ this (a CPU check of the GPU path)")
    p.add_argument("--layers", type=int, default=48, help="transformer blocks (released: 48)")
    p.add_argument("--gemma-layers", type=int, default=48, help="Gemma layers (released: 48)")
    p.add_argument("--text-tokens", type=int, default=1024, help="prompt length, a multiple of 128 (released: 1024)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", help="default: cuda when available")
    p.add_argument("--out", default="end_to_end_results", help="folder for the JSON and the mp4")
    args = p.parse_args(argv)
    args.device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if args.device.type != "cuda" and not args.quick and args.divisor == 1:
        p.error("the released sizes need a CUDA GPU (38 GB of transformer weights); on the CPU run --quick, or cut "
                "the structure down with --divisor 16 --layers 2 --gemma-layers 2")
    if (args.stage1_steps is not None and args.stage1_steps < 1) or args.stage2_steps not in (None, 1, 2, 3):
        p.error("--stage1-steps must be at least 1 and --stage2-steps 1 to 3 (the refinement's 3 steps cut)")
    if args.text_streamed and args.quick:
        p.error("--text-streamed streams the released Gemma's layers; the demo's (--quick) is not streamed")
    if args.cuda_graphs == "on" and args.device.type != "cuda":
        p.error("--cuda-graphs on needs a CUDA device; use off or auto on the CPU")
    default = (128, 128, 17) if args.quick else (768, 512, 121)
    args.width, args.height, args.frames = (given or value for given, value in
                                            zip((args.width, args.height, args.frames), default))
    return args


def build_encoder(args: argparse.Namespace, dtype: torch.dtype):
    """(the prompt encoder, the transformer's config, a function building the other models)."""
    if args.quick:
        from ltx2_core.demo import demo_models

        demo = demo_models(ModelVersion.V2_3, args.device, dtype)
        return demo.prompt_encoder, demo.transformer.config, lambda: demo
    structure = e2e_models.Structure(args.divisor, args.layers, args.gemma_layers, args.text_tokens)
    encoder = e2e_models.prompt_encoder(structure, args.device, dtype)
    if args.text_streamed:  # as the command line's memory plan loads it on CUDA: Gemma's layers stream from the host
        from ltx2_core.memory.offload import stream_text_encoder

        encoder.gemma.to("cpu"), encoder.projection.to("cpu")
        stream_text_encoder(encoder, args.device, pin=args.device.type == "cuda")
    return (encoder, e2e_models.transformer_config(structure),
            lambda: e2e_models.models(structure, args.device, dtype, None))


def sampler_options(args: argparse.Namespace) -> dict:
    options = {"cuda_graphs": args.cuda_graphs}  # auto: captured where the step can be (CUDA, resident, no cache)
    return options | ({"passes_per_forward": args.passes_per_forward} if args.passes_per_forward else {})


def run(args: argparse.Namespace, clock: Clock) -> dict:
    """One generation, part by part on `clock` (after an untimed one of a step a stage with --warmup); returns the
    report."""
    dtype = torch.bfloat16 if args.device.type == "cuda" else torch.float32
    records: list = []
    settings = step_cache(args.cache)
    options = cache_kwargs(settings, records)  # refused here, before any model is built
    release = RELEASES[ModelVersion.V2_3]
    steps = {"stage 1": args.stage1_steps or release.steps, "stage 2": args.stage2_steps or 3}
    if released(args):
        print(estimate(steps["stage 1"], steps["stage 2"], args.warmup), flush=True)
    request = Request(prompt=PROMPT, width=args.width, height=args.height, frames=args.frames, fps=24.0,
                      steps=args.stage1_steps, seed=args.seed, mode="two-stage")
    request.check()  # before any model is built, as the command line checks it
    start = time.perf_counter()
    encoder, config, build_rest = build_encoder(args, dtype)
    video, audio = guidance_for(request, config)  # the release's guidance, as the command line sets it
    request = replace(request, video_guidance=video, audio_guidance=audio)
    if args.warmup:
        encode_request(request, encoder, config)
    setup = time.perf_counter() - start
    clock.resume()
    positive, negative = encode_request(request, encoder, config)
    clock.mark("text")
    encoder.release()  # 30 GB freed before the transformer is built
    start = time.perf_counter()
    models = build_rest()._replace(prompt_encoder=encoder)
    if args.fp8:
        quantize_blocks(models.transformer)
    check_request(request, models, config)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.warmup:  # one step a stage, decoded and written, on a clock of its own
        path = generate_parts(args, replace(request, steps=1), models, (positive, negative), Clock(args.device),
                              {"stage 2": 1}, cache_kwargs(settings, []), out / "warmup.mp4")
        Path(path).unlink()
    resident = torch.cuda.memory_allocated(args.device) / GIB if clock.cuda else None
    setup += time.perf_counter() - start
    clock.resume()
    mp4 = generate_parts(args, request, models, (positive, negative), clock,
                         {name: n for name, n in (("stage 2", args.stage2_steps),) if n}, options,
                         out / f"end_to_end_{variant(args)}.mp4")
    return report(args, clock, steps, setup, resident, mp4, records)


def generate_parts(args: argparse.Namespace, request: Request, models, prompts: tuple, clock: Clock,
                   cut: dict[str, int], options: dict, path: Path) -> str:
    """`generate` after the prompts, part by part on `clock` (from its last mark): the stages, the decode, the mp4
    at `path` (returned)."""
    sampler = TimedSampler(LocalSampler(models.transformer, **sampler_options(args)), clock, cut)
    request = replace(request, **options)
    latent, generator = sample_request(request, models, *prompts, clock.progress, sampler=sampler)
    hook = models.decoders.audio.register_forward_pre_hook(lambda *_: clock.mark("video decode"))
    try:
        result = decode(latent, models.decoders, generator=generator_on(generator, request.seed, models.decoders))
        clock.mark("audio decode")
    finally:
        hook.remove()
    mp4 = result.save(path)
    clock.mark("write")
    return mp4


def report(args, clock: Clock, steps: dict, setup: float, resident: float | None, mp4: str, records: list) -> dict:
    device = (torch.cuda.get_device_name(args.device) if clock.cuda else
              f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)")
    cut = steps["stage 1"] != RELEASES[ModelVersion.V2_3].steps or steps["stage 2"] != 3
    total = sum(clock.parts[p] for p in PARTS)
    return {
        "device": device, "torch": torch.__version__, "date": datetime.date.today().isoformat(),
        "variant": variant(args), "weights": weights(args), "cache": args.cache,
        "cuda_graphs": args.cuda_graphs, "warmup": args.warmup,
        "text_encoder": "streamed from the host" if args.text_streamed else "resident, freed after encoding",
        "passes_per_forward": args.passes_per_forward, "quick": args.quick,
        "structure": "demo (tiny)" if args.quick else
        f"LTX-2.3 released{'' if args.divisor == 1 else f' widths ÷ {args.divisor}'}, {args.layers} blocks, "
        f"Gemma {args.gemma_layers} layers, {args.text_tokens} text tokens",
        "size": f"{args.width}×{args.height}×{args.frames}", "steps": steps, "steps_cut": cut,
        "parts_s": {p: round(clock.parts[p], 3) for p in PARTS}, "total_s": round(total, 3),
        "peak_gib": max(clock.peaks.values()) if clock.cuda else None,
        "part_peak_gib": {p: round(clock.peaks[p], 2) for p in PARTS} if clock.cuda else None,
        "resident_gib": resident, "setup_s": round(setup, 1), "step_times": clock.step_times(),
        "cache_records": [record.__dict__ for record in records], "mp4": str(mp4),
        # ours / theirs, for the release's run only
        "anchors": {name: {"wall_s": wall, "gpu_s": gpu, "ours_over_wall": round(total / wall, 2),
                           "ours_over_gpu_s": round(total / gpu, 2)} for name, (wall, gpu) in ANCHORS.items()}
        if released(args) and not cut else None,
    }


def markdown(r: dict) -> str:
    peaks = r["part_peak_gib"] or {}
    title = (f"# End to end: {r['structure']}, {r['size']}, {r['variant']} on {r['device']}, torch {r['torch']}, "
             f"{r['date']}, {'after a warm-up run' if r['warmup'] else 'the process’s first run'}")
    steps = (f"steps: stage 1 {r['steps']['stage 1']}, stage 2 {r['steps']['stage 2']}"
             + (" (CUT from the release's 30 + 3: not the release's run)" if r["steps_cut"] else " (the release's)"))
    lines = [title, "", steps, "", "| part | seconds | peak GiB |", "|---|---|---|"]
    lines += [f"| {p} | {s:.2f} | {peaks.get(p, '–')} |" for p, s in r["parts_s"].items()]
    lines.append(f"| **total** | **{r['total_s']:.2f}** | {r['peak_gib'] or '–'} |")
    for stage, t in r["step_times"].items():
        median = "–" if t["median_step_s"] is None else f"{t['median_step_s']:.3f} s"
        lines.append(f"\n{stage}: {t['steps']} steps, first {t['first_step_s']:.3f} s, then median {median}")
    resident = "–" if r["resident_gib"] is None else f"{r['resident_gib']:.1f}"
    lines.append(f"\nset-up (not timed above): {r['setup_s']} s; resident after set-up: {resident} GiB")
    lines += [f"vs {name}: {a['wall_s']} s wall ({a['gpu_s']} GPU-seconds); ours (one GPU) / theirs: "
              f"{a['ours_over_wall']} of the wall time, {a['ours_over_gpu_s']} of the GPU-seconds"
              for name, a in (r["anchors"] or {}).items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    clock = Clock(args.device)
    path = Path(args.out) / f"end_to_end_{variant(args)}.json"
    try:
        result = run(args, clock)
    except Exception as exc:  # what was timed before it failed, for a run on a lent device that cannot be repeated
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"variant": variant(args), "error": repr(exc), "parts_s": clock.parts,
                                    "part_peak_gib": clock.peaks}, indent=1))
        raise
    path.write_text(json.dumps(result, indent=1))
    print(markdown(result))
    print(f"\nwrote {path} and {result['mp4']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
