"""One rank of the spread text encoder test (started by tests/distributed/test_text_encode.py with real gloo
groups): encodes the test prompts on one device (this rank alone, batched and one by one), then spread over the
group, prompts on different ranks and as a layer pipeline, and writes the differences, the plan and the bytes.

argv: rank, world, init file, family (gemma3 | gemma4), text encoder file, checkpoint / transformer file, output."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402

from ltx2_core.loader.text_weights import load_prompt_encoder  # noqa: E402
from ltx2_core.memory.text_layout import TextLayout  # noqa: E402
from ltx2_core.parallel.text_encode import SpreadEncoder, plan_for, text_bytes  # noqa: E402
from support.ranks import joined  # noqa: E402

MAX = 32
POSITIVE = "A red car drives through a rainy city at night, neon lights reflecting on the wet street."
NEGATIVE = "blurry, low quality"


def load(family: str, text_encoder: str, checkpoint: str):
    if family == "gemma3":
        return load_prompt_encoder(text_encoder, checkpoint, max_length=MAX)
    from support.gemma4 import sources25

    return load_prompt_encoder(text_encoder, sources25(Path(text_encoder), Path(checkpoint)), max_length=MAX)


def diff(got, want) -> float:
    return max((g - w).abs().max().item() for g, w in zip(got, want))


def resident_bytes(encoder) -> int:
    modules = (encoder.gemma, encoder.projection)
    return sum(t.numel() * t.element_size() for m in modules if m is not None
               for t in (*m.parameters(), *m.buffers()) if not t.is_meta)


def main(rank: int, world: int, init_file: str, family: str, text_encoder: str, checkpoint: str, out: str) -> None:
    with joined(rank, world, init_file):
        encoder = load(family, text_encoder, checkpoint)
        batched = encoder.encode_batch([POSITIVE, NEGATIVE])  # the one-device encoding: one batch of two
        alone = [encoder.encode_batch([p]) for p in (POSITIVE, NEGATIVE)]  # and one prompt at a time
        whole = text_bytes(encoder).whole
        result = {"whole": whole}

        split = SpreadEncoder(encoder, TextLayout("prompts"))
        positive, negative = split.encode(POSITIVE, NEGATIVE)
        result["split"] = {"vs_batched": max(diff(positive, batched.select(0)), diff(negative, batched.select(1))),
                           "vs_alone": max(diff(positive, alone[0]), diff(negative, alone[1])),
                           "context_bytes": sum(t.numel() * t.element_size() for t in positive)}
        only, none = split.encode(POSITIVE)  # one prompt: its owner (rank 0) encodes it
        result["split"] |= {"one_prompt": diff(only, alone[0]) if none is None else -1.0,
                            "sent": split.traffic.sent, "received": split.traffic.received}

        budget = whole * 3 // 4  # a whole replica does not fit: the plan must cut Gemma into a pipeline
        layout = plan_for(encoder, budget=budget)
        piped = SpreadEncoder(encoder, layout)
        positive, negative = piped.encode(POSITIVE, NEGATIVE)
        again = piped.encode_batch([NEGATIVE])  # a second call through the same patched model
        result["pipeline"] = {"mode": layout.mode, "bounds": layout.bounds, "rank_bytes": layout.rank_bytes,
                              "budget": budget, "resident": resident_bytes(encoder),
                              "vs_batched": max(diff(positive, batched.select(0)), diff(negative, batched.select(1))),
                              "again_vs_alone": diff(again, alone[1]),
                              "sent": piped.traffic.sent, "received": piped.traffic.received,
                              "messages": piped.traffic.messages,
                              "state_bytes": MAX * encoder.gemma.config.hidden_size * 4,
                              "context_bytes": sum(t.numel() * t.element_size() for t in positive)}
        assert torch.isfinite(positive.video).all()
        Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:8])
