"""The video decode on the persistent workers (`ltx2_core.runtime.WorkerDecode`) against the same tiled decode in
this process: seconds (the workers' first decode, which loads their decoder, apart), the largest difference of the
videos, and the tiles and MiB rank 0 received. The demo model's decoder (the workers load it from `ModelFiles()`,
this process builds the same one), CPU workers under gloo (`--device cuda`: one per GPU, NCCL).

    python bench/worker_decode.py                       # 2 CPU workers, 768x512x121 latent, default tiles
    python bench/worker_decode.py --workers 2 --width 256 --height 256 --frames 49 --tile 128 --overlap 64
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from ltx2_core import ModelFiles  # noqa: E402
from ltx2_core.demo import demo_decoders  # noqa: E402
from ltx2_core.geometry import latent_shape  # noqa: E402
from ltx2_core.model.video_vae.tiling import TilingConfig, decode_video, tile_axes, video_tiles  # noqa: E402
from ltx2_core.parallel import ParallelConfig  # noqa: E402
from ltx2_core.runtime import Controller, WorkerDecode  # noqa: E402


def _timed(decode, repeats: int) -> tuple[float, torch.Tensor]:
    """The best of `repeats` seconds, and the last video."""
    best, video = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        video = decode()
        if video.device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return best, video


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--height", type=int, default=512)
    parser.add_argument("--frames", type=int, default=121)
    parser.add_argument("--tile", type=int, default=None, help="spatial tile in px (default: TilingConfig's)")
    parser.add_argument("--overlap", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    tiling = TilingConfig() if args.tile is None else TilingConfig(spatial_tile=args.tile, spatial_overlap=args.overlap)
    shape = latent_shape(args.frames, args.height, args.width)
    latent = torch.randn(1, 128, *shape, generator=torch.Generator().manual_seed(0)).to(args.device)
    decoder = demo_decoders("2.0").video.to(args.device)
    tiles = len(video_tiles(tile_axes(shape, tiling)))
    threads = None if args.device == "cuda" else max(1, (os.cpu_count() or 1) // args.workers)
    controller = Controller(ModelFiles(), ParallelConfig(sp=args.workers), device_type=args.device, threads=threads)
    try:
        controller.start()
        here, want = _timed(lambda: decode_video(latent, decoder, tiling, output_device="cpu"), args.repeats)
        spread = WorkerDecode(controller)
        first, _ = _timed(lambda: spread(latent, decoder, tiling, output_device="cpu"), 1)
        there, got = _timed(lambda: spread(latent, decoder, tiling, output_device="cpu"), args.repeats)
    finally:
        controller.shutdown()
    print(f"{args.width}x{args.height}x{args.frames}, {tiles} tiles, {args.workers} {args.device} workers "
          f"({threads or 1} threads each; here {torch.get_num_threads()}):")
    print(f"  here {here:.2f} s; on the workers {there:.2f} s ({here / there:.2f}x), their first (loading the "
          f"decoder) {first:.2f} s; max |difference| {(got - want).abs().max().item():.2e}; rank 0 received "
          f"{spread.last.traffic.received_bytes / 2**20:.0f} MiB of tiles, the video is {got.numel() * 4 / 2**20:.0f} "
          "MiB")


if __name__ == "__main__":
    main()
