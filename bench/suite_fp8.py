"""The GPU suite's `fp8` section: does fp8 pay? One forward of the full-width slice (--layers blocks of the first
--versions structure, batch 1) at 1,536 and 6,144 video tokens (quick: the smallest tiny size, one linear shape) in bf16 and with
its block linears in fp8 under each fp8 matmul recipe (ltx2_core/quant/fp8_matmul.py), and where the time goes.

`forward` rows: ms, `vs_bf16` (bf16 ms / recipe ms; issue 36's goal is ≥ 1.35 at 6,144 tokens on fp8 tensor cores)
and `rel_err` (‖out − out_bf16‖ / ‖out_bf16‖ of the video output; fp8 rounds the block linears' weights and inputs).
`linear` rows: the slice's three linear shapes at 6,144 tokens (q/k/v/out 4096→4096, FF in 4096→16384, FF out
16384→4096 for 2.0) per recipe: the activation quantiser alone, the fp8 GEMM alone on pre-quantised operands, and
the bf16 GEMM, so the profile says whether quantisation or the GEMM costs. The fused quantisers compile with the
suite's --compile-backend (quick: "eager", a smoke run). A failure is recorded in the row's `error`, not raised.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from suite_measure import median_ms
from suite_models import clip, random_transformer, suite_config

from ltx2_core.quant import fp8_matmul
from ltx2_core.quant.fp8_matmul import RECIPES, quantise_tensor, set_fp8_matmul
from ltx2_core.quant.policy import quantize_blocks

Row = dict[str, Any]
SIZES = {1536: (121, 256, 384), 6144: (121, 512, 768)}  # video tokens: (frames, height, width)


@torch.no_grad()
def fp8_rows(s) -> list[Row]:
    """`s` is the suite's Settings."""
    fp8_matmul.FUSED_BACKEND = s.compile_backend
    timing = (1, 0) if s.quick else (s.repeats, s.warmup)  # quick: each output computed once (smoke)
    version = s.versions[0]
    config = suite_config(version, s.slice_layers, s.quick)
    bf16 = random_transformer(config, s.device, s.dtype)
    fp8 = copy.deepcopy(bf16)
    quantize_blocks(fp8)
    recipes = [name for name in RECIPES if _runs(name, s.device)]
    sizes = s.forward_sizes[:1] if s.quick else tuple(SIZES.values())
    rows = []
    for size in sizes:
        c = clip(config, size, s.text_tokens, s.device, s.dtype)
        run = bf16.prepare_run(c.video_positions, c.audio_positions, c.text.video, c.text.audio)
        video, audio = c.streams()
        want = bf16(video, audio, run)[0].float()
        base = median_ms(lambda v=video, a=audio, r=run: bf16(v, a, r), s.device, *timing)
        head = {"part": "forward", "version": version, "video_tokens": c.tokens[0]}
        rows.append(head | {"recipe": "bf16", "ms": base, "vs_bf16": 1.0, "rel_err": 0.0})
        fp8_run = fp8.prepare_run(c.video_positions, c.audio_positions, c.text.video, c.text.audio)
        for recipe in recipes:
            row = head | {"recipe": recipe}
            try:
                set_fp8_matmul(fp8, recipe, s.device)
                got = fp8(video, audio, fp8_run)[0].float()
                ms = median_ms(lambda v=video, a=audio, r=fp8_run: fp8(v, a, r), s.device, *timing)
                row |= {"ms": ms, "vs_bf16": base / ms, "rel_err": ((got - want).norm() / want.norm()).item()}
            except Exception as error:  # noqa: BLE001 - one lent GPU run: record, go on
                row["error"] = f"{type(error).__name__}: {error}"[:300]
            rows.append(row)
    tokens = clip(config, sizes[-1], s.text_tokens, s.device, s.dtype).tokens[0]
    rows += _linear_rows(s, bf16.transformer_blocks[0], tokens, recipes, timing)
    return rows


def _runs(recipe: str, device: torch.device) -> bool:
    try:
        fp8_matmul.resolve(recipe, device)
    except ValueError:
        return False
    return True


def _linear_rows(s, block: torch.nn.Module, tokens: int, recipes: list[str], timing: tuple[int, int]) -> list[Row]:
    """The quantiser alone and the GEMM alone, per linear shape of a block and per recipe."""
    layers = {"attn1.to_q": block.attn1.to_q, "ff.net.0.proj": block.ff.net[0].proj, "ff.net.2": block.ff.net[2]}
    if s.quick:  # a smoke run: one shape
        layers = {"ff.net.2": layers["ff.net.2"]}
    rows = []
    generator = torch.Generator(s.device).manual_seed(3)
    for name, linear in layers.items():
        n, k = linear.weight.shape
        x = torch.randn(tokens, k, generator=generator, device=s.device, dtype=s.dtype)
        weight, weight_scale = quantise_tensor(linear.weight)
        head = {"part": "linear", "layer": name, "m×k×n": f"{tokens}×{k}×{n}",
                "bf16_gemm_ms": median_ms(lambda linear=linear, x=x: F.linear(x, linear.weight), s.device,
                                          *timing)}
        for recipe in recipes:
            spec = RECIPES[recipe]
            if spec.activation is None:
                continue
            row = head | {"recipe": recipe}
            try:
                quantise = fp8_matmul.quantiser(spec)
                q, scale = quantise(x) if spec.activation == "row" else quantise(x, None)
                row["quantise_ms"] = median_ms(lambda quantise=quantise, x=x, spec=spec: (
                    quantise(x) if spec.activation == "row" else quantise(x, None)), s.device, *timing)
                scale_b = weight_scale.expand(1, n).contiguous() if spec.activation == "row" else weight_scale
                out_dtype = torch.bfloat16 if x.is_cuda else x.dtype
                row["gemm_ms"] = median_ms(lambda q=q, w=weight, a=scale, b=scale_b, dtype=out_dtype: torch._scaled_mm(
                    q, w.t(), scale_a=a, scale_b=b, out_dtype=dtype), s.device, *timing)
                row["linear_ms"] = median_ms(lambda recipe=recipe, x=x, w=weight, b=weight_scale: fp8_matmul.linear(
                    x, w, b, None, recipe), s.device, *timing)
                row["vs_bf16"] = row["bf16_gemm_ms"] / row["linear_ms"]
            except Exception as error:  # noqa: BLE001 - one lent GPU run: record, go on
                row["error"] = f"{type(error).__name__}: {error}"[:300]
            rows.append(row)
    return rows
