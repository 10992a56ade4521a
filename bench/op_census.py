"""Where a forward's time goes at small sizes, counted on the CPU without computing anything: every ATen op of one
forward of the released structure (fake tensors: no weights, no memory), with its FLOPs and the bytes it reads and
writes, per release. The ops are what an eager GPU run launches; their count sets the host-bound floor at small sizes
(stage 1 of a two-stage run), and a roofline of each op (max(FLOPs / peak, bytes / bandwidth)) the device time.

    python bench/op_census.py                       # 2.0, 2.3, 2.5 at 384×256×121 (1,536 video tokens), 8 blocks
    python bench/op_census.py --size 768x512x121 --blocks 48 --json out.json

It answers "why are 2.3 and 2.5 slower than 2.0 at 1,536 tokens" with counts: the table per release, then the ops
each release launches beyond 2.0's, per block. A GPU profile confirms it (`bench/gpu_suite.py --sections forward`).
The text K/V of 2.0 and 2.5 (computed once per run) are outside the counted forward, as in the timed one.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "tests")]
from suite_models import Clip, suite_config  # noqa: E402

from ltx2_core.geometry import audio_latent_length, audio_positions, video_positions  # noqa: E402
from ltx2_core.model.transformer import LTX2Transformer  # noqa: E402
from ltx2_core.types import TextEmbeddings  # noqa: E402

PEAK_FLOPS, BANDWIDTH = 800e12, 3.35e12  # H100 SXM: dense bf16 matmul, HBM3 bytes per second
# ops that only re-describe memory: no kernel is launched for them
VIEWS = {"view", "_unsafe_view", "expand", "t", "transpose", "permute", "slice", "select", "unsqueeze", "squeeze",
         "detach", "alias", "as_strided", "split", "split_with_sizes", "chunk", "unbind", "reshape", "unflatten",
         "flatten", "narrow", "_reshape_alias", "lift_fresh", "empty", "view_as_real", "view_as_complex"}


class Op(NamedTuple):
    name: str
    flops: float
    bytes: float
    sync: bool = False  # the op reads a value back to the host (the host waits for the device there)


SYNCS = {"_local_scalar_dense", "item", "nonzero", "is_nonzero", "equal", "allclose", "tolist"}


def _bytes(tree) -> float:
    total = 0
    for value in torch.utils._pytree.tree_leaves(tree):
        if isinstance(value, torch.Tensor):
            total += value.numel() * value.element_size()
    return float(total)


def _flops(name: str, args, out) -> float:
    """The matmul FLOPs of an op (2·M·N·K), attention's QKᵀ and PV; 0 for the rest."""
    if name in ("mm", "bmm", "addmm", "baddbmm"):
        a, b = (args[1], args[2]) if name in ("addmm", "baddbmm") else (args[0], args[1])
        return 2.0 * a.numel() * b.shape[-1]
    if name.startswith("_scaled_dot_product") or name == "scaled_dot_product_attention":
        q, k = args[0], args[1]  # (B, heads, Tq, d), (B, heads, Tk, d)
        return 4.0 * q.numel() * k.shape[-2]
    return 0.0


class Census(TorchDispatchMode):
    """Every ATen op dispatched inside, with its FLOPs and bytes moved."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[Op] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.__name__.split(".")[0]
        if name not in VIEWS and func.namespace != "prim":
            self.ops.append(Op(name, _flops(name, args, out), _bytes(args) + _bytes(out), name in SYNCS))
        return out


def inputs(config, size: tuple[int, int, int], device: torch.device) -> Clip:
    """A clip's inputs as `suite_models.clip` makes them, uninitialised (fake tensors hold no values)."""
    frames, height, width = size
    f, rows, cols = (frames - 1) // 8 + 1, height // 32, width // 32
    audio_tokens = audio_latent_length(frames, 24.0)
    widths = (config.caption_channels or config.video.context_dim, config.caption_channels or config.audio.context_dim)

    def empty(*shape: int) -> torch.Tensor:
        return torch.empty(shape, device=device, dtype=torch.bfloat16)

    text = TextEmbeddings(*(empty(1, 1024, w) for w in widths))
    return Clip(empty(1, f * rows * cols, config.video.in_channels), empty(1, audio_tokens, config.audio.in_channels),
                text, text, video_positions(f, rows, cols, 24.0, device=device),
                audio_positions(audio_tokens, device=device), 0.7)


def census(version: str, blocks: int, size: tuple[int, int, int], passes: int = 1) -> list[Op]:
    """The ops of one forward of `version`'s released structure cut to `blocks`, at `size` (frames, height,
    width), in bf16, with `passes` guidance passes in its batch (fake tensors on the CPU: a CPU build of torch
    cannot run every op of a fake CUDA tensor)."""
    config = suite_config(version, blocks, quick=False)
    default, device = torch.get_default_dtype(), torch.device("cpu")
    torch.set_default_dtype(torch.bfloat16)  # built in bf16 on meta, outside the fake mode (its parameters stay plain)
    try:
        with torch.device("meta"):
            model = LTX2Transformer(config)
    finally:
        torch.set_default_dtype(default)
    with FakeTensorMode(allow_non_fake_inputs=True):
        model = model.to_empty(device=device).eval()  # fake parameters: no memory
        c = inputs(config, size, device)
        with torch.no_grad():
            run = model.prepare_run(c.video_positions, c.audio_positions, c.text.video, c.text.audio)
            video, audio = c.streams(passes)
            counting = Census()
            with counting:
                model(video, audio, run)
    return counting.ops


def summary(ops: list[Op], blocks: int) -> dict:
    flops = sum(op.flops for op in ops)
    roofline = sum(max(op.flops / PEAK_FLOPS, op.bytes / BANDWIDTH) for op in ops)
    elementwise = [op for op in ops if op.flops == 0]
    return {"ops": len(ops), "ops_per_block": round(len(ops) / blocks, 1),
            "syncs": sum(op.sync for op in ops), "tflop": round(flops / 1e12, 3),
            "flop_ms": round(flops / PEAK_FLOPS * 1e3, 2), "roofline_ms": round(roofline * 1e3, 2),
            "non_matmul_ops": len(elementwise),
            "non_matmul_gb": round(sum(op.bytes for op in elementwise) / 1e9, 2),
            "non_matmul_ms": round(sum(op.bytes for op in elementwise) / BANDWIDTH * 1e3, 2)}


def extra_ops(ops: list[Op], base: list[Op], blocks: int) -> dict[str, float]:
    """The ops (by name) this forward launches beyond `base`'s, per block."""
    more = Counter(op.name for op in ops)
    more.subtract(Counter(op.name for op in base))
    return {name: round(count / blocks, 1) for name, count in more.most_common() if count}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", default="2.0,2.3,2.5")
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--size", default="384x256x121", help="WIDTHxHEIGHTxFRAMES")
    parser.add_argument("--passes", type=int, default=1, help="guidance passes in the forward's batch")
    parser.add_argument("--json", type=Path, help="write the report here too")
    args = parser.parse_args(argv)
    width, height, frames = (int(v) for v in args.size.split("x"))
    versions = args.versions.split(",")
    counted = {v: census(v, args.blocks, (frames, height, width), args.passes) for v in versions}
    report = {"size": args.size, "blocks": args.blocks, "passes": args.passes,
              "releases": {v: summary(ops, args.blocks) for v, ops in counted.items()},
              "beyond_2.0_per_block": {v: extra_ops(ops, counted[versions[0]], args.blocks)
                                       for v, ops in counted.items() if v != versions[0]}}
    keys = list(next(iter(report["releases"].values())))
    print("| release | " + " | ".join(keys) + " |\n|---|" + "---|" * len(keys))
    for version, row in report["releases"].items():
        print(f"| {version} | " + " | ".join(str(row[k]) for k in keys) + " |")
    for version, extra in report["beyond_2.0_per_block"].items():
        print(f"{version}, ops per block beyond {versions[0]}'s: {extra}")
    for version, ops in counted.items():
        if any(op.sync for op in ops):
            print(f"{version}, ops that read a value back: {dict(Counter(op.name for op in ops if op.sync))}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
