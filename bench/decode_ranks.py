"""The video decode spread over ranks (`ltx2_core.parallel.tiled_decode`): bytes each rank sends, and time per
rank against one device.

1. Bytes (default): from the tile geometry alone (no decoder runs), for the two-stage sizes 768×512×121 and
   1280×768×121 and 1, 2, 4, 8 ranks: the tiles each rank decodes and the MiB it sends (fp32 weighted tiles; the
   root sends the latent to each other rank), with the default `TilingConfig()` (or --tile / --overlap).
2. `--measure N`: N processes really decode (gloo on the CPU, or NCCL with one GPU per rank: --device cuda) a
   released-layout convolutional decoder with random weights (width / --width-divisor) at --width×--height×--frames;
   rank 0 first decodes on one device alone (the baseline), then all ranks decode spread. Prints per rank: its
   tiles, bytes sent (counted, and checked against the geometry), seconds; rank 0 also the one-device seconds and
   the max abs difference of the videos (expected 0: the same sums in the same order).

    python bench/decode_ranks.py
    python bench/decode_ranks.py --measure 2 --width 256 --height 128 --frames 49 --tile 128 --overlap 32
    python bench/decode_ranks.py --measure 4 --device cuda --width-divisor 1 --width 768 --height 512 --frames 121
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from ltx2_core.geometry import VIDEO_SPACE_SCALE, VIDEO_TIME_SCALE  # noqa: E402
from ltx2_core.model.video_vae import VideoDecoder, VideoVaeConfig  # noqa: E402
from ltx2_core.model.video_vae.tiling import TilingConfig, decode_video, tile_axes, video_tiles  # noqa: E402
from ltx2_core.parallel.tiled_decode import decode_across  # noqa: E402
from support.configs import RELEASED_VAE_2_0  # noqa: E402
from support.video_vae import random_state  # noqa: E402

SIZES = ((768, 512, 121), (1280, 768, 121))
LATENT_CHANNELS, CHANNELS = 128, 3


def latent_size(width: int, height: int, frames: int) -> tuple[int, int, int]:
    return (frames - 1) // VIDEO_TIME_SCALE + 1, height // VIDEO_SPACE_SCALE, width // VIDEO_SPACE_SCALE


def shares(size: tuple[int, int, int], tiling: TilingConfig, ranks: int) -> list[tuple[int, int]]:
    """(tiles, bytes sent) of each rank of a spread decode of a latent of `size`, batch 1, fp32."""
    tiles = video_tiles(tile_axes(size, tiling))
    sent = [[0, 0] for _ in range(ranks)]
    for index, tile in enumerate(tiles):
        sent[index % ranks][0] += 1
        if index % ranks and len(tiles) > 1:
            sent[index % ranks][1] += CHANNELS * math.prod(s.stop - s.start for s in tile.output) * 4
    sent[0][1] += (ranks - 1) * LATENT_CHANNELS * math.prod(size) * 4
    return [(count, nbytes) for count, nbytes in sent]


def report_bytes(tiling: TilingConfig) -> None:
    for width, height, frames in SIZES:
        size = latent_size(width, height, frames)
        video = CHANNELS * frames * height * width * 4
        print(f"{width}x{height}x{frames} (latent {size}, video {video / 2**20:.0f} MiB fp32):")
        for ranks in (1, 2, 4, 8):
            per_rank = shares(size, tiling, ranks)
            cells = ", ".join(f"r{r}: {t} tiles {b / 2**20:.1f} MiB" for r, (t, b) in enumerate(per_rank))
            print(f"  {ranks} ranks: {cells}; all sent {sum(b for _, b in per_rank) / 2**20:.1f} MiB")


def rank_main(rank: int, ranks: int, init: str, args: argparse.Namespace) -> None:
    device = torch.device("cuda", rank) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.set_grad_enabled(False)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", init_method=f"file://{init}", rank=rank,
                            world_size=ranks)
    decoder = VideoDecoder(VideoVaeConfig.from_metadata(
        {**RELEASED_VAE_2_0, "decoder_base_channels": 128 // args.width_divisor}))
    decoder.load_state_dict(random_state(decoder, 0))
    decoder = decoder.eval().to(device)
    tiling = TilingConfig(spatial_tile=args.tile, spatial_overlap=args.overlap)
    size = latent_size(args.width, args.height, args.frames)
    latent = torch.randn(1, LATENT_CHANNELS, *size, generator=torch.Generator().manual_seed(1)).to(device)
    alone = None
    if rank == 0:
        start = _now(device)
        alone = decode_video(latent, decoder, tiling)
        alone_s = _now(device) - start
    dist.barrier()
    start = _now(device)
    video, traffic = decode_across(latent, decoder, tiling)
    seconds = _now(device) - start
    expected = shares(size, tiling, ranks)[rank][1]
    line = (f"rank {rank}: {len(traffic.tiles)} of {traffic.count} tiles, sent {traffic.sent_bytes / 2**20:.2f} MiB "
            f"(geometry: {expected / 2**20:.2f}), {seconds:.2f} s")
    if video is not None:
        line += (f"; one device {alone_s:.2f} s (x{alone_s / seconds:.2f}), max |diff| "
                 f"{(video - alone).abs().max().item():.3g}")
    print(line, flush=True)
    dist.barrier()
    dist.destroy_process_group()


def _now(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measure", type=int, metavar="RANKS", help="really decode over this many ranks")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--height", type=int, default=128)
    parser.add_argument("--frames", type=int, default=49)
    parser.add_argument("--width-divisor", type=int, default=8, help="the decoder's width: 128 / this")
    parser.add_argument("--tile", type=int, default=512, help="spatial tile in px")
    parser.add_argument("--overlap", type=int, default=64, help="spatial overlap in px")
    args = parser.parse_args()
    if not args.measure:
        return report_bytes(TilingConfig(spatial_tile=args.tile, spatial_overlap=args.overlap))
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // args.measure)))
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(rank_main, (args.measure, str(Path(tmp) / "init"), args), nprocs=args.measure)


if __name__ == "__main__":
    main()
