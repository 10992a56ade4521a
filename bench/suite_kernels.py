"""The GPU suite's `kernels` section: ours vs comfy-kitchen's fused kernels (ltx2_core/model/transformer/kernels.py).

Per structure (and LTX-2.0 with interleaved RoPE, where `rms_rope1` runs), at the middle clip size of the `forward`
section: the forward of a one-block slice, the video self-attention module, and the two fused ops alone (q/k
RMSNorm + RoPE on the video queries, the AdaLN modulation of the video stream), each timed with the switch on "ours"
and on "kitchen", with the largest difference relative to the output's scale. `auto_ops` names the ops "auto" takes
on this device (on a GPU: those a CUDA / Triton backend serves; on the CPU none, so "kitchen" runs comfy-kitchen's
eager backend there, a smoke run). A comfy-kitchen failure is recorded in the row's `error`, not raised.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from ltx2_core.model.transformer import kernels
from suite_measure import median_ms
from suite_models import clip, random_transformer, suite_config

Row = dict[str, Any]
MODES = ("ours", "kitchen")


@torch.no_grad()
def kernel_rows(s) -> list[Row]:
    """One row per structure; `s` is the suite's Settings."""
    if not kernels.has("rms_adaln"):
        return [{"error": "comfy-kitchen with rms_adaln (>= 0.2.40) is not installed: nothing to compare"}]
    size = s.forward_sizes[len(s.forward_sizes) // 2]
    variants = [(version, None) for version in s.versions] + [("2.0", "interleaved")] * ("2.0" in s.versions)
    rows = []
    for version, rope_type in variants:
        config = suite_config(version, 1, s.quick)
        config = replace(config, rope_type=rope_type) if rope_type else config
        model = random_transformer(config, s.device, s.dtype)
        row = {"version": version, "rope": config.rope_type, "size": "×".join(map(str, size[::-1]))}
        try:
            row |= _measure(s, model, clip(config, size, s.text_tokens, s.device, s.dtype))
        except Exception as error:  # noqa: BLE001 - one lent GPU run: record, go on
            row["error"] = f"{type(error).__name__}: {error}"[:300]
        rows.append(row)
        del model
        if s.device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def _measure(s, model, c) -> Row:
    config = model.config
    block = model.transformer_blocks[0]
    width, tokens = config.video.width, c.tokens[0]
    generator = torch.Generator(s.device).manual_seed(2)
    h = torch.randn(1, tokens, width, generator=generator, device=s.device, dtype=s.dtype)
    scale, shift = (0.1 * torch.randn(1, 1, width, generator=generator, device=s.device, dtype=s.dtype)
                    for _ in range(2))
    q = block.attn1.to_q(h)
    sides: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        with kernels.use_kernels(mode):
            run = model.prepare_run(c.video_positions, c.audio_positions, c.text.video, c.text.audio)
            video, audio = c.streams()
            sides[mode] = {
                "forward": lambda run=run, video=video, audio=audio: model(video, audio, run)[0],
                "attention": lambda run=run: block.attn1(h, rope=run.video_rope),
                "qk_norm_rope": lambda run=run: kernels.qk_norm_rope(q, block.attn1.q_norm, run.video_rope,
                                                                    config.rope_type, config.video.head_dim),
                "adaln": lambda: kernels.rms_adaln(h, scale, shift, config.norm_eps),
            }
    row: Row = {"video_tokens": tokens, "auto_ops": ",".join(op for op in kernels.OPS
                                                             if kernels.available(op, s.device, s.dtype)) or "none"}
    for name in sides["ours"]:
        outputs, ms = {}, {}
        for mode in MODES:
            with kernels.use_kernels(mode):
                fn = sides[mode][name]
                outputs[mode] = fn().float()
                ms[mode] = median_ms(fn, s.device, s.repeats, s.warmup)
        reference = outputs["ours"].abs().max().item()
        row |= {f"{name}_ours_ms": ms["ours"], f"{name}_kitchen_ms": ms["kitchen"],
                f"{name}_speedup": ms["ours"] / ms["kitchen"],
                f"{name}_diff": (outputs["kitchen"] - outputs["ours"]).abs().max().item() / max(reference, 1e-30)}
    return row
