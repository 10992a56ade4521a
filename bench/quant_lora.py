"""A LoRA on a quantised linear layer: added per call beside the stored bytes (`quant.low_rank`, what loader.lora does
for GGUF, int8, MXFP8, NVFP4) against once per stage (dequantise, add the delta, quantise again, restore after: what
it does for fp8, as the reference). CPU, fp32, medians; every figure a ratio or a size, for docs/small_cards/lora.md.

Per call, two equal results (`low_rank.linear` picks by FLOPs): the activations' product (x·Dᵀ)·Uᵀ, rows·R·(in + out)
multiply-adds, or U·D added to the weight the call dequantised anyway, out·in·R; the base call is the format's
dequantisation plus the matmul. Once per stage: the dequantisation in fp32, U·D added, the format's quantiser, and the
restore (the stored bytes copied to the host before and back after). "break-even calls": calls of one layer after
which per call has cost more time than once per stage (a stage calls each layer once per step). "delta error": how far
the update a requantised layer applies is from the LoRA's delta, ‖applied − Δ‖ / ‖Δ‖, for ‖Δ‖ = 1 % and 10 % of ‖W‖
(per call: the factors' rounding to bf16 only). "s=0 exact": the stored bytes of quantise(dequantise(W)) equal W's
(per call: always, nothing is attached at strength 0).

    python bench/quant_lora.py                 # tiny 256×256 and realistic 4096×4096, ranks 32, 128, 384
    python bench/quant_lora.py --quick         # tiny only
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

import gguf  # noqa: E402

from ltx2_core.quant import kitchen  # noqa: E402
from ltx2_core.quant.fp8 import FP8Linear, quantize as fp8_quantize  # noqa: E402
from ltx2_core.quant.gguf import GGUFLinear  # noqa: E402
from ltx2_core.quant.gguf_types import TYPES  # noqa: E402
from ltx2_core.quant.int8 import INT8_CONVROT, INT8_ROWWISE, INT8_TENSORWISE  # noqa: E402
from ltx2_core.quant.mxfp8 import MXFP8_FORMAT  # noqa: E402
from ltx2_core.quant.nvfp4 import NVFP4_FORMAT  # noqa: E402
from suite_measure import median_ms  # noqa: E402
from support.gguf_blocks import random_blocks  # noqa: E402

CPU = torch.device("cpu")
GGML = {t.name: t for t in TYPES.values()}
CONVROT256 = next(f for f in INT8_CONVROT if f.convrot == 256)
Requantise = Callable[[torch.Tensor], dict[str, torch.Tensor]]  # fp32 (out, in) -> the stored tensors


def _gguf(w: torch.Tensor, name: str) -> tuple[nn.Module, Requantise | None]:
    kind, qtype = GGML[name], gguf.GGMLQuantizationType[name]
    layer = GGUFLinear.like(nn.Linear(w.shape[1], w.shape[0], bias=False), kind)

    def quantise(weight: torch.Tensor) -> dict[str, torch.Tensor]:  # gguf's numpy quantiser, on the host
        data = torch.from_numpy(gguf.quants.quantize(weight.numpy(), qtype))
        return {"weight": data.reshape(weight.shape[0], -1)}

    try:
        stored = quantise(w)
        requantise = quantise
    except NotImplementedError:  # no quantiser for this type (the K types): random blocks, to time dequantising
        count = w.numel() // kind.block_size
        blocks = random_blocks(name, count, kind.type_size, np.random.default_rng(0), top=0.01)
        stored, requantise = {"weight": torch.from_numpy(blocks).reshape(w.shape[0], -1)}, None
    layer.load_state_dict(stored, assign=True)
    return layer, requantise


def _kitchen(w: torch.Tensor, fmt) -> tuple[nn.Module, Requantise]:
    linear = nn.Linear(w.shape[1], w.shape[0], bias=False)
    if fmt is MXFP8_FORMAT:
        def quantise(weight):
            q, s = kitchen.quantize_mxfp8(weight)
            return {"weight": q, "weight_scale": s.view(torch.float8_e8m0fnu)}
        layer = fmt.layer(linear, {"weight_scale"}, matmul=False)
    else:
        def quantise(weight):
            q, s = kitchen.quantize_int8(weight, fmt.rows, fmt.convrot)
            return {"weight": q, "weight_scale": s.reshape(() if not fmt.rows else (-1, 1))}
        layer = fmt.layer(linear, {"weight_scale"}, matmul=False)
    layer.load_state_dict(quantise(w), assign=True)
    return layer, quantise


def _nvfp4(w: torch.Tensor) -> tuple[nn.Module, Requantise]:
    def quantise(weight):
        packed, blocks, scale = kitchen.quantize_nvfp4(weight)
        return {"weight": packed, "weight_scale": blocks, "weight_scale_2": scale}
    layer = NVFP4_FORMAT.layer(nn.Linear(w.shape[1], w.shape[0], bias=False), {"weight_scale", "weight_scale_2"},
                               matmul=False)
    layer.load_state_dict(quantise(w), assign=True)
    return layer, quantise


def _fp8(w: torch.Tensor) -> tuple[nn.Module, Requantise]:
    def quantise(weight):
        q, s = fp8_quantize(weight)
        return {"weight": q, "weight_scale": s}
    layer = FP8Linear.like(nn.Linear(w.shape[1], w.shape[0], bias=False))
    layer.scaled_mm = False
    layer.load_state_dict(quantise(w), assign=True)
    return layer, quantise


FORMATS: dict[str, Callable[[torch.Tensor], tuple[nn.Module, Requantise | None]]] = {
    "GGUF Q8_0": lambda w: _gguf(w, "Q8_0"),
    "GGUF Q4_0": lambda w: _gguf(w, "Q4_0"),
    "GGUF Q4_K": lambda w: _gguf(w, "Q4_K"),
    "int8 tensorwise": lambda w: _kitchen(w, INT8_TENSORWISE),
    "int8 rowwise": lambda w: _kitchen(w, INT8_ROWWISE),
    "int8 ConvRot/256": lambda w: _kitchen(w, CONVROT256),
    "MXFP8": lambda w: _kitchen(w, MXFP8_FORMAT),
    "NVFP4": _nvfp4,
    "fp8 (fused today)": _fp8,
}


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _equal_bytes(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(a[k].reshape(-1).view(torch.uint8), b[k].reshape(-1).view(torch.uint8)) for k in a)


def _delta_error(layer: nn.Module, requantise: Requantise, w_deq: torch.Tensor, delta: torch.Tensor) -> float:
    """‖dequantise(requantise(W + Δ)) − W − Δ‖ / ‖Δ‖ for the layer's format."""
    twin = copy.deepcopy(layer)
    twin.load_state_dict(requantise(w_deq + delta), strict=True, assign=True)
    applied = twin.dequantized(torch.float32) - w_deq
    return float((applied - delta).norm() / delta.norm())


def bench_width(n: int, ranks: tuple[int, ...], tokens: tuple[int, ...], repeats: int) -> tuple[list, list]:
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(n, n, generator=gen) * 0.02
    calls, formats = [], []
    rows = {t: torch.randn(t, n, generator=gen) for t in tokens}
    t_mm = {t: median_ms(lambda x=x: F.linear(x, w), CPU, repeats, 1) for t, x in rows.items()}
    factors = {}
    for r in ranks:
        down, up = torch.randn(r, n, generator=gen) / n ** 0.5, torch.randn(n, r, generator=gen) / r ** 0.5
        factors[r] = (down, up)
        t_wsum = median_ms(lambda d=down, u=up: torch.addmm(w, u, d), CPU, repeats, 1)
        for t, x in rows.items():
            t_act = median_ms(lambda x=x, d=down, u=up: F.linear(F.linear(x, d), u), CPU, repeats, 1)
            picks = "weight" if t * 2 * n > n * n else "activations"
            calls.append((n, r, t, t_mm[t], t_act, t_wsum, picks, 2 * r * 2 * n))
    for name, make in FORMATS.items():
        layer, requantise = make(w)
        stored = {k: v.clone() for k, v in layer.state_dict().items()}
        w_deq = layer.dequantized(torch.float32)
        t_deq = median_ms(lambda m=layer: m.dequantized(torch.float32), CPU, repeats, 1)
        t_copy = median_ms(lambda s=stored: [t.to("cpu", copy=True) for t in s.values()], CPU, repeats, 1) * 2
        row = {"name": name, "n": n, "bytes": _bytes(stored.values()), "t_deq": t_deq, "t_copy": t_copy}
        if requantise is not None:
            row["t_requant"] = median_ms(lambda q=requantise, v=w_deq: q(v), CPU, max(1, repeats // 2), 1)
            row["exact0"] = _equal_bytes(requantise(w_deq), stored)
            down, up = factors[ranks[0]]
            base = up @ down
            row["errors"] = [_delta_error(layer, requantise, w_deq, base * (size * w_deq.norm() / base.norm()))
                             for size in (0.01, 0.10)]
        formats.append(row)
    return calls, formats


def _ms(value: float) -> str:
    return f"{value:,.1f} ms" if value >= 1 else f"{value * 1000:,.0f} µs"


def report(calls: list, formats: list, ranks: tuple[int, ...]) -> None:
    print("\nPer call, format-independent (fp32, one layer):")
    print("| layer | rank | rows | matmul | activations' product | U·D added to W | rule picks | factors (bf16) |")
    print("|---|---|---|---|---|---|---|---|")
    for n, r, t, mm, act, wsum, picks, size in calls:
        print(f"| {n}×{n} | {r} | {t} | {_ms(mm)} | {_ms(act)} ({act / mm:.1%}) | {_ms(wsum)} ({wsum / mm:.1%}) "
              f"| {picks} | {size / 2**20:.2f} MiB |")
    print("\nPer format: per call against once per stage (dequantise + add + requantise + restore):")
    print("| layer | format | stored | base call (dequant + matmul) | per call, rank " + ", ".join(map(str, ranks))
          + " | once per stage | break-even calls, rank " + ", ".join(map(str, ranks))
          + " | delta error requantised (1 %, 10 %) | s=0 exact requantised |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in formats:
        n = row["n"]
        rows_t = max(t for m, _, t, *_ in calls if m == n)
        mm = next(c[3] for c in calls if c[0] == n and c[2] == rows_t)
        base = row["t_deq"] + mm
        per_call = [min(c[4], c[5]) for c in calls if c[0] == n and c[2] == rows_t]
        wsum = {c[1]: c[5] for c in calls if c[0] == n and c[2] == rows_t}
        if "t_requant" in row:
            stages = [row["t_deq"] + wsum[r] + row["t_requant"] + row["t_copy"] for r in ranks]
            stage = f"{_ms(stages[0])} … {_ms(stages[-1])} ({stages[0] / base:.2f}–{stages[-1] / base:.2f} calls)"
            even = ", ".join(f"{s / p:,.0f}" for s, p in zip(stages, per_call))
            errors = ", ".join(f"{e:.0%}" for e in row["errors"])
            exact = "yes" if row["exact0"] else "no"
        else:
            stage, even, errors, exact = "no quantiser", "—", "—", "—"
        print(f"| {n}×{n}, {rows_t} rows | {row['name']} | {row['bytes'] / 2**20:.2f} MiB | {_ms(base)} | "
              + ", ".join(f"{p / base:.1%}" for p in per_call) + f" | {stage} | {even} | {errors} | {exact} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the tiny layer only")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    ranks = (32, 128, 384)
    widths = [(256, (8, 32), (64, 1024))] + ([] if args.quick else [(4096, ranks, (1024, 4096))])
    with torch.no_grad():
        for n, rs, tokens in widths:
            calls, formats = bench_width(n, rs, tokens, args.repeats)
            report(calls, formats, rs)


if __name__ == "__main__":
    main()
