"""The DFR canvas against ltx-pipelines 1.2.0's dfr_layout (run in its own Python): the padded canvas, segment and
slot frames for every valid frame count 9..481 (and refusals of bad ones), the tiles of one and two temporal x2
rounds built from those canvases as the reference pipeline builds them, tile counts beyond the segment count, bad seam
lists (both refuse), and the stitch of random tile latents. All integer layouts compare exactly (pure integer code);
the stitch is a copy of slices, so it is compared exactly too."""

from __future__ import annotations

import json

import pytest
import torch
from support.reference120 import run_reference

from ltx2_core.dfr_layout import canvas, latent_index, segment_length, stitch, tiles, to_local

FRAMES = list(range(9, 482, 8))
BAD_FRAMES = [0, 1, 2, 10, 480]


def _attempt(function, *args):
    try:
        return function(*args)
    except ValueError:
        return "ValueError"


def _round_cases() -> list[tuple[list[int], int, int]]:
    """(seams, frames, tiles) of rounds 1 and 2 for each canvas, as DFRPipeline derives them (seams and frame
    count doubled, round 2's seams = round 1's seams and slots), plus tile counts past the segment count."""
    cases = []
    for n in FRAMES:
        padded, _, positions = canvas(n)
        seams, frames = [2 * p for p in positions], 2 * (padded - 1) + 1
        cases.append((seams, frames, 2))
        slots = sorted({s for tile in tiles(seams, frames, 2) for s in tile.slots})
        cases.append(([2 * p for p in sorted({*seams, *slots})], 2 * (frames - 1) + 1, 4))
        cases.append((seams, frames, 7))
    return cases


BAD_SEAMS = [([48, 96], 96, 2),  # last seam is not the last frame
             ([48, 56, 96], 97, 2),  # a segment of one latent frame
             ([48, 92, 144], 145, 2),  # a span off the latent grid
             ([96, 48, 144], 145, 2),  # not increasing
             ([], 97, 2), ([48, 96], 97, 0), ([48, 96], 1, 1)]


def test_layout_equals_the_reference(tmp_path):
    cases = _round_cases() + BAD_SEAMS
    stitch_case = ([64, 128, 192, 256], 257, 3)
    layout = tiles(*stitch_case)
    generator = torch.Generator().manual_seed(0)
    latents = [torch.randn(1, 2, tile.latent_stop - tile.latent_start, 2, 3, generator=generator) for tile in layout]
    ref = run_reference("dfr_layout.py", {f"tile{i}": latent for i, latent in enumerate(latents)},
                        {"frames": FRAMES + BAD_FRAMES, "tile_cases": cases, "stitch_case": stitch_case}, tmp_path)
    expected = json.loads(bytes(ref["json"].tolist()).decode())
    ours = {str(n): list(c) if isinstance(c := _attempt(canvas, n), tuple) else c for n in FRAMES + BAD_FRAMES}
    assert ours == expected["canvas"]
    ours_tiles = [[[list(v) if isinstance(v, tuple) else v for v in tile] for tile in r]
                  if isinstance(r := _attempt(tiles, *case), list) else r for case in cases]
    assert ours_tiles == expected["tiles"]
    assert sum(r == "ValueError" for r in ours_tiles) == len(BAD_SEAMS)  # every bad case refused, no good one
    assert torch.equal(stitch(latents, layout), ref["stitched"])  # slices joined: a pure copy


def test_the_layout_reads_as_documented():
    assert segment_length(48) == 24 and segment_length(64) == 32 and segment_length(96) == 32  # tie: the longer
    assert canvas(161) == (161, 32, [32, 64, 96, 128, 160]) and canvas(49) == (49, 24, [24, 48])
    assert canvas(113) == (121, 24, [24, 48, 72, 96, 120])  # padded by 8 frames (32 would pad 16)
    two = tiles([48, 96], 97, 2)
    assert [(t.pixel_start, t.pixel_end, t.drop, t.anchors, t.slots) for t in two] == [
        (0, 48, 0, (48,), (24,)), (0, 96, 7, (48, 96), (24, 72))]
    assert to_local([48, 72], 48) == [0, 24] and latent_index(16) == 2
    with pytest.raises(ValueError, match="latent border"):
        latent_index(12)
    with pytest.raises(ValueError, match="does not fit its tile"):
        stitch([torch.zeros(1, 1, 3, 1, 1)] * 2, two)
