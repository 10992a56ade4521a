"""The GPU suite's `attention` section: every attention backend (ltx2_core/model/transformer/attention_backends.py)
on the transformer's attention shapes, timed and checked against fp32 math attention, and auto's choice checked
against the measured fastest.

Shapes at the released widths (32 heads × 128 video, 32 heads × 64 audio), at 1,536 / 6,144 / 15,360 video tokens
(stage 1 of a two-stage run, 768×512×121, 1280×768×121), 126 audio tokens and 1,024 text tokens (121 frames):
video self-attention, the same with the keyframe / IC-LoRA additive bias (masked), text cross-attention, audio to
video and video to audio; and audio self-attention and audio text cross-attention once. Batch 1 (one guidance pass).

One row per (shape, backend that ran): ms (median), `error` (largest difference from fp32 math attention relative to
its largest magnitude), `declared` (False: the backend's entry says it cannot serve this class, e.g. a mask, and it
was tried anyway to see). A backend missing here or not serving the device gets no row (the summary's `unavailable`
names it). Per shape a summary row: `auto` (what auto picks on this device), `fastest` (the measured fastest exact
backend that ran, declared or not; not `sdpa`, which runs one of the others), `auto_is_fastest` (False flags a row of
`attention_select.RANKING` to reorder, or a backend entry to widen) and `auto_vs_fastest` (auto's time over the
fastest's). Under --quick: 2 heads and a few tokens on the CPU.
"""

from __future__ import annotations

from typing import Any

import torch

from ltx2_core.model.transformer import attention_select as select
from ltx2_core.model.transformer.attention import attention_bias
from ltx2_core.model.transformer.attention_backends import BACKENDS, batched
from suite_measure import median_ms

Row = dict[str, Any]
NO_MASK_PROBLEM = "it takes no attention mask"
EXACT_ENOUGH = 2e-2  # an exact backend in bf16 stays within a few bf16 steps of fp32 attention


def _shapes(s) -> list[tuple[str, int, tuple[int, int, int, int, bool]]]:
    """(name, video tokens, (q tokens, k tokens, heads, head_dim, masked)) of each measured attention."""
    heads, video_dim, audio_dim = (2, 128, 64) if s.quick else (32, 128, 64)
    video_sizes = (96,) if s.quick else (1536, 6144, 15360)
    audio, text = (20, s.text_tokens) if s.quick else (126, 1024)
    shapes = []
    for tokens in video_sizes:
        shapes += [("video self", tokens, (tokens, tokens, heads, video_dim, False)),
                   ("video self, masked", tokens, (tokens, tokens, heads, video_dim, True)),
                   ("text cross", tokens, (tokens, text, heads, video_dim, False)),
                   ("audio to video", tokens, (tokens, audio, heads, audio_dim, False)),
                   ("video to audio", tokens, (audio, tokens, heads, audio_dim, False))]
    return shapes + [("audio self", 0, (audio, audio, heads, audio_dim, False)),
                     ("audio text cross", 0, (audio, text, heads, audio_dim, False))]


def _reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """fp32 math attention, a few heads at a time (the scores of 32 heads at 15,360 tokens would take 30 GB)."""
    k, v = batched(q, k, v)
    step = max(1, 2**31 // (4 * q.shape[1] * k.shape[1]))
    parts = [BACKENDS["math"].run(*(t[:, :, h:h + step].float() for t in (q, k, v)),
                                  None if mask is None or mask.dtype == torch.bool else mask.float())
             for h in range(0, q.shape[2], step)]
    return torch.cat(parts, dim=2)


@torch.no_grad()
def attention_rows(s) -> list[Row]:
    """Every backend on every shape; `s` is the suite's Settings."""
    table = select.device_table(s.device)
    rows: list[Row] = []
    generator = torch.Generator(s.device).manual_seed(3)
    for name, video_tokens, (q_tokens, k_tokens, heads, head_dim, masked) in _shapes(s):
        q, k, v = (torch.randn(1, n, heads, head_dim, generator=generator, device=s.device, dtype=s.dtype)
                   for n in (q_tokens, k_tokens, k_tokens))
        mask = None
        if masked:  # a control's tokens (the last eighth) attended at strength 0.5, as an IC-LoRA's attention
            weights = torch.ones(1, q_tokens, k_tokens, device=s.device)
            weights[:, :, -(k_tokens // 8):] = 0.5
            mask = attention_bias(weights, s.dtype)
        reference = _reference(q, k, v, mask)
        scale = reference.abs().max().item()
        shape = {"shape": name, "video_tokens": video_tokens, "q": q_tokens, "k": k_tokens, "head_dim": head_dim}
        measured, skipped = [], []
        for backend in BACKENDS.values():
            problem = backend.problem(table, s.dtype, head_dim, masked)
            if problem not in (None, NO_MASK_PROBLEM):
                skipped.append(backend.name)
                continue
            row = shape | {"backend": backend.name, "exact": backend.exact, "declared": problem is None}
            try:
                out = backend.run(q, k, v, mask)
                row |= {"ms": median_ms(lambda b=backend: b.run(q, k, v, mask), s.device, s.repeats, s.warmup),
                        "error": (out.float() - reference).abs().max().item() / max(scale, 1e-30)}
                measured.append(row)
            except Exception as error:  # noqa: BLE001 - one lent GPU run: record, go on
                row["failed"] = f"{type(error).__name__}: {error}"[:160]
            rows.append(row)
        rows.append(_summary(shape, table, s.dtype, masked, measured, skipped))
        del q, k, v, mask, reference
        if s.device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def _summary(shape: Row, table: dict, dtype: torch.dtype, masked: bool, measured: list[Row],
             skipped: list[str]) -> Row:
    auto = select.choose("auto", table, dtype, shape["head_dim"], masked).name
    exact = [row for row in measured if row["exact"] and row["error"] < EXACT_ENOUGH and row["backend"] != "sdpa"]
    fastest = min(exact, key=lambda row: row["ms"]) if exact else None
    auto_ms = next((row["ms"] for row in measured if row["backend"] == auto), None)
    return shape | {"backend": "summary", "auto": auto, "fastest": fastest and fastest["backend"],
                    "auto_is_fastest": fastest is not None and fastest["backend"] == auto,
                    "auto_vs_fastest": None if auto_ms is None or fastest is None else auto_ms / fastest["ms"],
                    "unavailable": ", ".join(skipped) or None}
