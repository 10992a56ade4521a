"""The reference side of tests/unit/test_dfr_layout.py: ltx-pipelines 1.2.0's dfr_layout over the test's cases
(canvases, the tiles of temporal rounds, bad seams) and its stitch of the test's tile latents."""

import json

import torch
from exchange import inputs, outputs
from ltx_pipelines.dfr_layout import resolve_canvas, stitch_tile_latents, tile_ranges


def _attempt(function, *args):
    try:
        return function(*args)
    except ValueError:
        return "ValueError"


t, settings = inputs()
result = {"canvas": {n: _attempt(resolve_canvas, n) for n in settings["frames"]},
          "tiles": [[list(tile) for tile in ranges] if isinstance(ranges := _attempt(tile_ranges, *case), list)
                    else ranges for case in settings["tile_cases"]]}
seams, frames, count = settings["stitch_case"]
layout = tile_ranges(seams, frames, count)
stitched = stitch_tile_latents([t[f"tile{i}"] for i in range(len(layout))], layout)
outputs({"json": torch.tensor(list(json.dumps(result).encode()), dtype=torch.uint8), "stitched": stitched})
