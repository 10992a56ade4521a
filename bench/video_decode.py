"""Video VAE decoding: peak memory of tiled vs untiled decoding, ours and the reference ltx_core's.

Sides: ours untiled (`decode_video(..., tiling=None)`), ours tiled (default `TilingConfig()`: 512 px tiles,
64 px overlap, 64-frame chunks with 24 overlap; fp32 output), the reference's `VideoDecoder.forward` and its
`tiled_decode` with `TilingConfig.default()` (the same tiles; its chunks are consumed as they come, not kept).

1. Estimate, full width and full size (default 1280×768, 121 frames, bf16): every side runs under
   `FakeTensorMode`, so no kernel runs, and `LiveTensorMemory` reports the peak of simultaneously live tensor
   bytes beyond the weights, i.e. what the GPU caching allocator must hold (without fragmentation and cuDNN
   workspaces). Seconds on a CPU.
2. `--measure`: the same four sides really run, fp32 on the CPU, at 1/width-divisor width and the given size,
   each in its own subprocess (resident-set high-water mark reset after the decoder is built; glibc told to
   return freed blocks) for time, peak memory and the max abs difference between the sides.

    python bench/video_decode.py --version {2.0,2.3} [--width 1280 --height 768 --frames 121]
    python bench/video_decode.py --version 2.0 --measure --frames 17 --width-divisor 16

Needs the reference: pip install --no-deps ltx-core==1.0.0 (plus einops).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from bench.memory import LiveTensorMemory, peak_extra_mib, reset_peak  # noqa: E402
from ltx2_core.model.video_vae import VideoDecoder, VideoVaeConfig  # noqa: E402
from ltx2_core.model.video_vae.tiling import TilingConfig, decode_video  # noqa: E402
from support.configs import RELEASED_VAE_2_0, RELEASED_VAE_2_3  # noqa: E402
from support.reference import import_ltx_core  # noqa: E402
from support.video_vae import random_state  # noqa: E402

SIDES = ("ours-untiled", "ours-tiled", "reference-untiled", "reference-tiled")
SUBSAMPLE = 4  # every 4th row and column of the decoded video is kept to compare the sides


def section(args) -> dict:
    released = RELEASED_VAE_2_0 if args.version == "2.0" else RELEASED_VAE_2_3
    return {**released, "decoder_base_channels": 128 // args.width_divisor}


def build(args, side: str, state: dict | None) -> torch.nn.Module:
    """The decoder of `side`, holding `state` (None: leave the weights as built, e.g. fake)."""
    if side.startswith("ours"):
        decoder = VideoDecoder(VideoVaeConfig.from_metadata(section(args)))
    else:
        import_ltx_core()
        from ltx_core.model.video_vae import VideoDecoderConfigurator

        decoder = VideoDecoderConfigurator.from_config({"vae": section(args)})
    if state is not None:
        decoder.load_state_dict(state)
    return decoder.eval()


def latent_shape(args) -> tuple[int, ...]:
    return (1, 128, (args.frames - 1) // 8 + 1, args.height // 32, args.width // 32)


def decode(side: str, decoder, latent, subsample: int | None) -> torch.Tensor | None:
    """Runs one side; returns the decoded video, every `subsample`-th row and column (None: keep nothing)."""
    if side.startswith("ours"):
        video = decode_video(latent, decoder, TilingConfig() if side == "ours-tiled" else None)
    elif side == "reference-untiled":
        video = decoder(latent)
    else:
        from ltx_core.model.video_vae.tiling import TilingConfig as RefTiling

        kept = [_keep(chunk, subsample) for chunk in decoder.tiled_decode(latent, RefTiling.default())]
        return torch.cat(kept, dim=2) if subsample else None
    return _keep(video, subsample)


def _keep(video: torch.Tensor, subsample: int | None) -> torch.Tensor | None:
    return video[..., ::subsample, ::subsample].clone() if subsample else None


def estimate(args) -> None:
    """Peak live tensor memory of each side at full width, under fake tensors."""
    args.width_divisor = 1
    output_gib = 3 * args.frames * args.height * args.width * 4 / 2**30
    print(f"LTX-{args.version} video VAE decoder, full width, {args.width}x{args.height}, {args.frames} frames, "
          f"bf16: peak live tensor memory beyond the weights (fake tensors; ours returns fp32 = "
          f"{output_gib:.2f} GiB, the reference bf16)")
    peaks = {}
    for side in SIDES:
        with FakeTensorMode():
            torch.set_default_dtype(torch.bfloat16)
            decoder = build(args, side, None)
            torch.set_default_dtype(torch.float32)
            latent = torch.randn(latent_shape(args), dtype=torch.bfloat16)
            with LiveTensorMemory() as memory, torch.no_grad():
                decode(side, decoder, latent, subsample=None)
        peaks[side] = memory.peak / 2**30
        print(f"{side:>18}: {peaks[side]:.2f} GiB")
    print(f"tiled / untiled: ours {peaks['ours-tiled'] / peaks['ours-untiled']:.2f}, reference "
          f"{peaks['reference-tiled'] / peaks['reference-untiled']:.2f}; ours / reference: untiled "
          f"{peaks['ours-untiled'] / peaks['reference-untiled']:.2f}, tiled "
          f"{peaks['ours-tiled'] / peaks['reference-tiled']:.2f}; ours tiled with the video kept on the host "
          f"(output_device='cpu'): {peaks['ours-tiled'] - output_gib:.2f} GiB on the decoding device")


def run_side(args) -> dict:
    torch.set_num_threads(args.threads)
    state = random_state(build(args, "ours", None), seed=0)
    decoder = build(args, args.side, state)
    latent = torch.randn(latent_shape(args), generator=torch.Generator().manual_seed(1))
    base = reset_peak()
    start = time.perf_counter()
    with torch.no_grad():
        video = decode(args.side, decoder, latent, SUBSAMPLE)
    seconds = time.perf_counter() - start
    peak = peak_extra_mib(base)
    torch.save(video, args.output)
    return {"s": seconds, "peak_mib": peak}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", default="2.0", choices=["2.0", "2.3"])
    p.add_argument("--width", type=int, default=1280)
    p.add_argument("--height", type=int, default=768)
    p.add_argument("--frames", type=int, default=121)
    p.add_argument("--width-divisor", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--measure", action="store_true", help="run the sides for real at 1/width-divisor width")
    p.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    p.add_argument("--output", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.side:
        print(json.dumps(run_side(args)))
        return
    if not args.measure:
        estimate(args)
        return
    # glibc keeps freed large blocks mapped after its mmap threshold adapts; a fixed threshold returns them
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "131072"}
    results, videos = {}, {}
    for side in SIDES:
        output = Path(f"/tmp/bench_video_decode_{side}.pt")
        cmd = [sys.executable, __file__, "--side", side, "--output", str(output)] + sys.argv[1:]
        run = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
        results[side] = json.loads(run.stdout)
        videos[side] = torch.load(output, weights_only=True)
        output.unlink()
    print(f"LTX-{args.version} video VAE decoder at 1/{args.width_divisor} width, {args.width}x{args.height}, "
          f"{args.frames} frames, fp32 CPU, {args.threads} threads, measured")
    for side in SIDES:
        print(f"{side:>18}: {results[side]['s']:.1f} s, peak extra {results[side]['peak_mib']:.0f} MiB")
    ratio = results["ours-tiled"]["peak_mib"] / results["ours-untiled"]["peak_mib"]
    print(f"ours tiled / untiled peak memory: {ratio:.2f}")
    print(f"ours / reference peak: untiled {results['ours-untiled']['peak_mib'] / results['reference-untiled']['peak_mib']:.2f}, "
          f"tiled {results['ours-tiled']['peak_mib'] / results['reference-tiled']['peak_mib']:.2f}")
    for kind in ("untiled", "tiled"):
        diff = (videos[f"ours-{kind}"] - videos[f"reference-{kind}"]).abs().max().item()
        print(f"max abs diff ours vs reference, {kind}: {diff:.1e}")
    seam = (videos["ours-tiled"] - videos["ours-untiled"]).abs()
    print(f"tiled vs untiled (ours): max abs {seam.max().item():.2e}, mean abs {seam.mean().item():.2e}")


if __name__ == "__main__":
    main()
