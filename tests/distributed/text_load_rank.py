"""One rank of the per-rank text encoder load test (started by tests/distributed/test_text_load.py with real gloo
groups): the layout planned from the files' headers before Gemma loads, then only this rank's part read; writes the
bytes it read, what the plan gave it, and its spread encoding against the one-device encoding.

argv: rank, world, init file, family (gemma3 | gemma4), text encoder file, checkpoint / transformer file, output."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from distributed.text_rank import MAX, NEGATIVE, POSITIVE, diff  # noqa: E402
from ltx2_core.loader.text_weights import load_prompt_encoder  # noqa: E402
from ltx2_core.memory.text_file_bytes import skeleton_bytes, text_skeleton  # noqa: E402
from ltx2_core.memory.text_layout import stage_bytes  # noqa: E402
from ltx2_core.parallel.text_encode import SpreadEncoder, text_bytes  # noqa: E402
from ltx2_core.parallel.text_load import part_for, plan_from_files  # noqa: E402
from support.ranks import joined  # noqa: E402


def sources(family: str, text_encoder: str, checkpoint: str):
    if family == "gemma3":
        return checkpoint
    from support.gemma4 import sources25

    return sources25(Path(text_encoder), Path(checkpoint))


def main(rank: int, world: int, init_file: str, family: str, text_encoder: str, checkpoint: str, out: str) -> None:
    with joined(rank, world, init_file):
        files = sources(family, text_encoder, checkpoint)
        skeleton = text_skeleton(text_encoder, files, max_length=MAX)  # no weight read
        sizes = skeleton_bytes(skeleton)
        layout = plan_from_files(skeleton, "cpu", budget=sizes.whole * 3 // 4)  # a whole one does not fit
        part = part_for(layout, rank)
        encoder = load_prompt_encoder(text_encoder, files, max_length=MAX, part=part)
        read = text_bytes(encoder)
        planned = stage_bytes(sizes, part.start, part.end, part.head, prompts=0)
        positive, negative = SpreadEncoder(encoder, layout).encode(POSITIVE, NEGATIVE)
        del encoder
        whole = load_prompt_encoder(text_encoder, files, max_length=MAX)  # the one-device encoding, after
        batched = whole.encode_batch([POSITIVE, NEGATIVE])
        result = {"mode": layout.mode, "bounds": layout.bounds, "read": read.whole, "planned": planned,
                  "whole": sizes.whole, "header_equals_loaded": sizes == text_bytes(whole),
                  "read_layers": [n > 0 for n in read.layers],
                  "vs_batched": max(diff(positive, batched.select(0)), diff(negative, batched.select(1)))}
        Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:8])
