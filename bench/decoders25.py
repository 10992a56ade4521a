"""LTX-2.5's two video decoders side by side: time and peak device memory of one decode, for the README's "which
decoder to pick".

Sides, each at the released widths with random weights made on the device (the weights' values do not change the
work): the diffusion decoder (`ltx-2.5-video-vae-bf16`, 1.2.0's `DiffusionVideoDecoder` defaults: neighborhood
attention stages, two denoising steps at full resolution) with comfy-kitchen's `na3d` and with our eager one, tiled
(512 px tiles, stages 4-5) and untiled; the convolutional decoder (`ltx-2.5-video-vae-conv-bf16`, taken here with
LTX-2.3's released block list) tiled and untiled. Sizes: the one-stage output 768×512 and the two-stage output
1536×1024, 121 frames. Times are medians after a warm-up (CUDA events on a GPU); memory is the allocator's peak
above the weights. A side that runs out of memory says so in its row.

    python bench/decoders25.py                      # on a GPU: bf16, the released widths
    python bench/decoders25.py --quick              # CPU smoke run: tiny widths and sizes, fp32
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from ltx2_core.model.video_vae import VideoDecoder, VideoVaeConfig  # noqa: E402
from ltx2_core.model.video_vae import neighborhood_attention  # noqa: E402
from ltx2_core.model.video_vae.diffusion_config import DiffusionDecoderConfig  # noqa: E402
from ltx2_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder  # noqa: E402
from ltx2_core.model.video_vae.tiling import TilingConfig, decode_video  # noqa: E402
from suite_measure import median_ms, peak_extra_bytes  # noqa: E402
from support.configs import RELEASED_VAE_2_3  # noqa: E402
from support.video_vae25 import TINY_CONV_VAE25, TINY_DIFFUSION_VAE  # noqa: E402

SIZES = ((121, 512, 768), (121, 1024, 1536))
QUICK_SIZES = ((9, 64, 96), (9, 128, 192))


@torch.no_grad()
def _random_(module: torch.nn.Module, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    """`module` allocated on `device` in `dtype` with N(0, 1/fan-in) matrices, unit norms, small vectors."""
    module = module.to(dtype).to_empty(device=device)
    generator = torch.Generator(device).manual_seed(0)
    for name, param in module.named_parameters():
        if param.dim() >= 2:
            param.normal_(0.0, param[0].numel() ** -0.5, generator=generator)
        elif "norm" in name:
            param.fill_(1.0)
        else:
            param.normal_(0.0, 0.02, generator=generator)
    for name, buffer in module.named_buffers():
        if "std" in name:
            buffer.fill_(1.0)
        elif "mean" in name:
            buffer.zero_()
    return module.eval()


def decoders(quick: bool, device: torch.device, dtype: torch.dtype) -> dict[str, torch.nn.Module]:
    diffusion = DiffusionDecoderConfig.from_metadata(TINY_DIFFUSION_VAE) if quick else DiffusionDecoderConfig()
    conv = VideoVaeConfig.from_metadata(TINY_CONV_VAE25 if quick else RELEASED_VAE_2_3)
    with torch.device("meta"):
        built = {"diffusion": DiffusionVideoDecoder(diffusion), "conv": VideoDecoder(conv)}
    return {name: _random_(module, device, dtype) for name, module in built.items()}


def sides(kitchen: bool, eager: bool) -> list[tuple[str, str, bool, bool | None]]:
    """(name, decoder, tiled, use comfy-kitchen's na3d); the eager na3d beside the kitchen's only if `eager`."""
    out = [("conv, untiled", "conv", False, None), ("conv, tiled", "conv", True, None)]
    for tiled in (False, True):
        for use_kitchen in ((True, False) if kitchen and eager else (kitchen,)):
            name = f"diffusion{', tiled' if tiled else ', untiled'}, {'kitchen' if use_kitchen else 'eager'} na3d"
            out.append((name, "diffusion", tiled, use_kitchen))
    return out


@torch.no_grad()
def measure(args: argparse.Namespace) -> list[dict]:
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = torch.float32 if args.quick else torch.bfloat16
    models = decoders(args.quick, device, dtype)
    weights = {name: sum(p.numel() * p.element_size() for p in m.parameters()) for name, m in models.items()}
    latent_channels = {"diffusion": models["diffusion"].config.latent_channels,
                       "conv": models["conv"].config.latent_channels}
    rows = []
    sizes = [tuple(int(v) for v in size.split("x"))[::-1] for size in args.sizes] if args.sizes else (
        QUICK_SIZES if args.quick else SIZES)
    for frames, height, width in sizes:
        for name, which, tiled, use_kitchen in sides(neighborhood_attention.kitchen_available(), args.eager):
            latent = torch.randn(1, latent_channels[which], (frames - 1) // 8 + 1, height // 32, width // 32,
                                 device=device, dtype=dtype)
            tiling = TilingConfig() if tiled else None
            generator = torch.Generator(device).manual_seed(0)

            def run():
                original = neighborhood_attention._kitchen_na3d
                if use_kitchen is False:
                    neighborhood_attention._kitchen_na3d = None
                try:
                    return decode_video(latent, models[which], tiling, generator=generator)
                finally:
                    neighborhood_attention._kitchen_na3d = original

            row = {"decoder": name, "size": f"{width}×{height}×{frames}", "weights_gb": round(weights[which] / 1e9, 2)}
            try:
                row["ms"] = round(median_ms(run, device, args.repeats, warmup=1), 1)
                row["peak_gb"] = round(peak_extra_bytes(run, device) / 1e9, 2)
            except torch.OutOfMemoryError:
                row["ms"] = row["peak_gb"] = "out of memory"
            if device.type == "cuda":
                torch.cuda.empty_cache()
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny widths and sizes (a CPU smoke run)")
    p.add_argument("--device", help="default: cuda when available")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sizes", nargs="*", help="WIDTHxHEIGHTxFRAMES each (default: 768x512x121 1536x1024x121)")
    p.add_argument("--eager", action="store_true", help="also time the eager na3d where comfy-kitchen's is installed "
                   "(on an H100 about 25x slower: 33 s a 768x512x121 decode)")
    args = p.parse_args(argv)
    rows = measure(args)
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k in keys) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
