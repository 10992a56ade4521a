"""One rank of the traffic test (tests/distributed/test_traffic.py; bench/scale_model.py runs it too): a tiny
transformer under `cfg × sp × tp` on real gloo ranks, every collective's input recorded by wrapping the functional
collectives the parallel passes call, and the bytes this rank sent per forward counted from them."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "distributed")]

import torch.distributed._functional_collectives as funcol  # noqa: E402

from layout_rank import four_heads, parallelize  # noqa: E402
from ltx2_core.demo import demo_inputs  # noqa: E402
from ltx2_core.parallel import ParallelConfig  # noqa: E402
from support.ranks import joined  # noqa: E402

WRAPPED = ("all_to_all_single", "all_gather_single", "all_reduce")


def recording(calls: list[dict]) -> dict:
    """Wraps the functional collectives: each call appends its kind and its input's bytes to `calls`; returns the
    originals (to put back)."""
    originals = {name: getattr(funcol, name) for name in WRAPPED}

    def wrap(name, original):
        def call(tensor, *args, **kwargs):
            calls.append({"kind": name, "bytes": tensor.numel() * tensor.element_size(), "shape": list(tensor.shape)})
            return original(tensor, *args, **kwargs)
        return call

    for name, original in originals.items():
        setattr(funcol, name, wrap(name, original))
    return originals


def sent(calls: list[dict], layout: ParallelConfig) -> dict:
    """Bytes this rank sent, by axis, with the model's conventions (traffic.py): a ring all-reduce 2(n−1)/n of its
    payload, an all-to-all (n−1)/n of the rank's input, an all-gather n−1 times the rank's input."""
    s, t = layout.sp, layout.tp
    sp = sum(c["bytes"] * (s - 1) / s for c in calls if c["kind"] == "all_to_all_single")
    sp += sum(c["bytes"] * (s - 1) for c in calls if c["kind"] == "all_gather_single")
    tp = sum(c["bytes"] * 2 * (t - 1) / t for c in calls if c["kind"] == "all_reduce")
    return {"sp_bytes": sp, "tp_bytes": tp}


def main(rank: int, world: int, init_file: str, shape: str, version: str, out: str) -> None:
    with joined(rank, world, init_file):
        layout = ParallelConfig(*(int(n) for n in shape.split("x")))
        model = copy.deepcopy(four_heads(version))
        parallelize(model, layout)
        inputs = demo_inputs(model, text_tokens=7, height=128, width=96)  # 36 video, 18 audio tokens
        calls: list[dict] = []
        originals = recording(calls)
        try:
            video, audio = model(*inputs)
        finally:
            for name, original in originals.items():
                setattr(funcol, name, original)
        config = model.config
        result = {"sent": sent(calls, layout), "calls": calls, "video_tokens": inputs[0].latent.shape[1],
                  "audio_tokens": inputs[1].latent.shape[1], "text_tokens": 7, "element_size": video.element_size(),
                  "config": {"version": config.version.value, "video_heads": config.video.heads,
                             "video_head_dim": config.video.head_dim, "audio_heads": config.audio.heads,
                             "audio_head_dim": config.audio.head_dim, "layers": config.num_layers,
                             "out_channels": config.video.out_channels}}
        Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6])
