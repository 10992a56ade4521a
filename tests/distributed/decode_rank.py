"""One rank of the spread-decode test (started by tests/distributed/test_tiled_decode.py, real gloo groups): decodes
a case's latent with its share of the tiles, and on the root compares the video with the one-device tiled decode;
writes what it saw (difference, tiles, bytes sent, the bytes its tiles hold) as JSON."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from ltx2_core.demo.decoders import DEMO_VAES, _random_  # noqa: E402
from ltx2_core.model.video_vae import VideoDecoder, VideoVaeConfig  # noqa: E402
from ltx2_core.model.video_vae.diffusion_config import DiffusionDecoderConfig  # noqa: E402
from ltx2_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder  # noqa: E402
from ltx2_core.model.video_vae.diffusion_tiling import pixel_slices, plan_tiles  # noqa: E402
from ltx2_core.model.video_vae.tiling import TilingConfig, decode_video, tile_axes, video_tiles  # noqa: E402
from ltx2_core.parallel.tiled_decode import SpreadDecode  # noqa: E402
from support.ranks import joined  # noqa: E402
from support.video_vae25 import TINY_DIFFUSION_VAE, _random  # noqa: E402

SEED = 11
CONV_TILING = TilingConfig(spatial_tile=64, spatial_overlap=32, temporal_tile=16, temporal_overlap=8)
SPATIAL_TILING = TilingConfig(spatial_tile=64, spatial_overlap=32, temporal_tile=None, temporal_overlap=0)
# case: (decoder, latent (F', H', W'), tiling); the conv cases cut 6 tiles (2 × 1 × 3: even over 2 and 3 ranks),
# 5 (1 × 1 × 5, in space only: uneven over both) and 1 (the root alone); the diffusion case 2 × 2 stage-4-5
# tiles (even over 2 ranks, uneven over 3)
CASES = {"conv-6": ("conv", (3, 2, 4), CONV_TILING), "conv-5": ("conv", (3, 2, 6), SPATIAL_TILING),
         "conv-1": ("conv", (3, 2, 4), None), "noise-6": ("noise", (3, 2, 4), CONV_TILING),
         "diffusion-4": ("diffusion", (1, 2, 3), SPATIAL_TILING)}


def decoder(kind: str) -> VideoDecoder | DiffusionVideoDecoder:
    """The case's decoder, the same random weights on every rank (fp32, eval)."""
    if kind == "diffusion":
        model = DiffusionVideoDecoder(DiffusionDecoderConfig.from_metadata(TINY_DIFFUSION_VAE))
        model.load_state_dict(_random(model, SEED))
        return model.eval()
    # "noise": a timestep-conditioned decoder, which draws decode noise from the generator
    model = VideoDecoder(VideoVaeConfig.from_metadata({**DEMO_VAES["2.0"], "timestep_conditioning": kind == "noise"}))
    _random_(model, torch.Generator().manual_seed(SEED))
    return model.eval()


def tile_bytes(model, latent: torch.Tensor, tiling: TilingConfig | None, generator, ranks: int, rank: int) -> int:
    """The bytes of the weighted tiles this rank owns (round robin), from the tile geometry alone."""
    if isinstance(model, DiffusionVideoDecoder):
        plan = plan_tiles(model, latent, tiling, generator=generator)
        sizes = [plan.x_init[:, :, :, h, w].numel() for h, w in (pixel_slices(plan, tile) for tile in plan.tiles)]
    else:
        tiles = video_tiles(tile_axes(tuple(latent.shape[2:]), tiling or TilingConfig.off()))
        sizes = [latent.shape[0] * model.config.out_channels * math.prod(s.stop - s.start for s in tile.output)
                 for tile in tiles]
    if len(sizes) == 1:
        return 0
    return sum(size for index, size in enumerate(sizes) if index % ranks == rank) * 4


def main(rank: int, world: int, init_file: str, case: str, out: str) -> None:
    kind, size, tiling = CASES[case]
    with joined(rank, world, init_file):
        model = decoder(kind)
        channels = 16 if kind == "diffusion" else 128
        latent = torch.randn(1, channels, *size, generator=torch.Generator().manual_seed(SEED))
        if rank:  # another rank's latent and generator: the root's are decoded
            latent = torch.randn_like(latent)
        spread = SpreadDecode()
        video = spread(latent, model, tiling, generator=torch.Generator().manual_seed(SEED + rank))
        result = {"tiles": spread.last.tiles, "sent": spread.last.sent_bytes, "is_none": video is None,
                  "received": spread.last.received_bytes, "count": spread.last.count,
                  "latent_bytes": latent.numel() * 4, "state_bytes": torch.Generator().get_state().numel(),
                  "own_tile_bytes": tile_bytes(model, latent, tiling, torch.Generator().manual_seed(SEED), world, rank)}
        if rank == 0:
            want = decode_video(latent, model, tiling, generator=torch.Generator().manual_seed(SEED))
            result |= {"diff": (video - want).abs().max().item(), "scale": want.abs().max().item(),
                       "shape": list(video.shape), "want_shape": list(want.shape)}
        dist.barrier()
        Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
