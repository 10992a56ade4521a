"""How long a window each layout allows (docs/video_in/long_video.md): the longest 8k+1 pixel frames at 768x512 that
the memory plan (`ltx2_core.memory.plan.plan_memory`, the code path `ModelFiles.plan` runs before a user's
generation) accepts, for the released LTX-2.3 and LTX-2.5 22B transformers (meta models of their released sizes, bf16
or fp8 block linears), one-stage with the four guidance passes (the plan lowers the passes per forward and streams
blocks where it must), on 24, 48 and 80 GB cards, under sequence parallelism of 1, 2, 4 and 8 ranks (each rank's
plan: its 1/sp of the video tokens, `activation_bytes(sp=...)`). Every module of the run is counted as
bench/memory_plan.py counts it (the text encoder visiting while it encodes, the decoders, a decode tile; LTX-2.5
with its convolutional decoder); host RAM is not planned here.

Two tables: every block resident (what a multi-rank run does today: the command line plans memory on one device
only), with the most guidance passes per forward that fit (4, 2 or 1), for sp 1, 2, 4, 8; and one device with the
plan free to stream blocks (the command line's --memory auto), where memory alone allows far longer windows than the
models were trained for.

    python bench/window_lengths.py [--height 512 --width 768 --fps 24]
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from bench.memory_plan import RELEASED, released_side  # noqa: E402
from ltx2_core.memory.plan import TILE_BYTES_512, MemoryPlan, MemoryPlanError, plan_memory  # noqa: E402
from ltx2_core.memory.plan import transformer_weight_bytes  # noqa: E402
from ltx2_core.model.transformer.config import TransformerConfig  # noqa: E402

CARDS = (24, 48, 80)
LAYOUTS = (1, 2, 4, 8)
MAX_LATENT_FRAMES = 4000  # 32,000 pixel frames: the search's ceiling


@functools.cache
def released(version: str, fp8: bool):
    """(config, weight bytes, decoders, side) of a release, counted once on meta models."""
    config = TransformerConfig.from_metadata(*RELEASED[version])
    return config, transformer_weight_bytes(config, fp8=fp8), *released_side(version)


def plan(version: str, fp8: bool, card_gb: int, sp: int, frames: int, height: int, width: int, fps: float,
         resident: bool) -> MemoryPlan | None:
    """One rank's plan of a one-stage window, or None where it is refused. `resident`: only a plan that keeps every
    block on the device, with the most guidance passes per forward that allows it (4, 2 or 1)."""
    config, weights, decoders, side = released(version, fp8)
    for passes in (4, 2, 1) if resident else (4,):
        try:
            result = plan_memory(config, weights, card_gb * 10**9, frames, height, width, passes, fps=fps,
                                 fp8_available=not fp8, decoders=decoders, tile_bytes_512=TILE_BYTES_512, side=side,
                                 source="free on cuda:0", sp=sp)
        except MemoryPlanError:
            return None
        if not resident or result.streamed_blocks == 0:
            return result
    return None


def longest(version: str, fp8: bool, card_gb: int, sp: int, height: int, width: int, fps: float, resident: bool):
    """(frames, plan) of the longest window the plan accepts, or (0, None)."""
    low, high = 0, MAX_LATENT_FRAMES  # latent frames: low fits (0: none yet), high + 1 does not
    if plan(version, fp8, card_gb, sp, 1, height, width, fps, resident) is None:
        return 0, None
    low = 1
    while low < high:
        mid = (low + high + 1) // 2
        if plan(version, fp8, card_gb, sp, 8 * (mid - 1) + 1, height, width, fps, resident) is not None:
            low = mid
        else:
            high = mid - 1
    frames = 8 * (low - 1) + 1
    return frames, plan(version, fp8, card_gb, sp, frames, height, width, fps, resident)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--height", type=int, default=512)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--fps", type=float, default=24.0)
    args = parser.parse_args()
    print(f"longest window at {args.width}x{args.height}, {args.fps:g} fps: pixel frames (seconds), guidance passes "
          "per forward\n")
    for resident in (True, False):
        print("every block resident (what a multi-rank run does; sp ranks)\n" if resident else
              "\none device, the plan streaming the blocks that do not fit (the command line's --memory auto)\n")
        print("| model | weights | sp | " + " | ".join(f"{gb} GB" for gb in CARDS) + " |")
        print("|---|---|---|" + "---|" * len(CARDS))
        for version in ("2.3", "2.5"):
            for fp8 in (False, True):
                for sp in LAYOUTS if resident else (1,):
                    cells = []
                    for gb in CARDS:
                        frames, best = longest(version, fp8, gb, sp, args.height, args.width, args.fps, resident)
                        if best is None:
                            cells.append("—")
                            continue
                        streamed = f", {best.streamed_blocks} blocks streamed" if best.streamed_blocks else ""
                        capped = "≥ " if frames >= 8 * (MAX_LATENT_FRAMES - 1) + 1 else ""
                        cells.append(f"{capped}{frames} ({frames / args.fps:.0f} s), {best.passes_per_forward} "
                                     f"passes{streamed}")
                    print(f"| LTX-{version} 22B | {'fp8' if fp8 else 'bf16'} | {sp} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
