"""bench/native_swap.py's report: the markdown table and the JSON file."""

from __future__ import annotations

import json
import os
from pathlib import Path

NAMES = {"native": "ComfyUI SamplerCustomAdvanced", "ours": "LTX-2 SamplerCustomAdvanced (fast)"}
RATIOS = {None: "ours / native", "with_easycache": "ours / native, both with EasyCache",
          "ours_easycache_over_native": "ours with EasyCache / native without"}


def _mib(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def _name(key: str) -> str:
    base, _, patch = key.partition("+")
    return NAMES[base] + (f" + {patch}" if patch else "")


def table(report: dict) -> str:
    """The samplers' rows (a refusal as its message), then ours / native (below 1: ours is faster or smaller)."""
    rows, ratios = report["samplers"], report["ours_over_native"]
    quick = " (--quick: a CPU smoke run, not a speed claim)" if report["quick"] else ""
    model = (f"{report['released_layers']} of 48 released blocks, random weights" if report.get("released_layers")
             else report["checkpoint"])
    title = (f"Native swap: {model} ({report['dtype']}), {report['width']}x{report['height']}x"
             f"{report['frames']} @ {report['fps']} fps, cfg {report['cfg']:g}, euler, {report['steps']} steps, "
             f"{report['device']}, torch {report['torch']}, ComfyUI {report['comfyui']}; median of "
             f"{report['repeats']} after a warm-up{quick}")
    header = ("| sampler | whole sampling (s) | per step (ms) | peak device memory (MiB) | video latent std / abs max "
              "| audio latent std / abs max | EasyCache skipped |")
    lines = [title, "", header, "|---|---:|---:|---:|---:|---:|---:|"]
    for key, row in rows.items():
        if "refused" in row:
            lines.append(f"| {_name(key)} | refused: {row['refused']} | | | | | |")
            continue
        skipped = ", ".join(map(str, row.get("easycache_skipped", []))) or "–"
        lines.append(f"| {_name(key)} | {row['median_s']:.3f} | {row['per_step_s'] * 1e3:.1f} | "
                     f"{_mib(row['peak_mib'])} | {row['video']['std']:.3f} / {row['video']['abs_max']:.3f} | "
                     f"{row['audio']['std']:.3f} / {row['audio']['abs_max']:.3f} | {skipped} |")
    for key, label in RATIOS.items():
        ratio = ratios if key is None else ratios.get(key)
        if ratio is None or "time" not in ratio:
            continue
        peak = "n/a" if ratio["peak"] is None else f"{ratio['peak']:.2f}"
        lines.append(f"| {label} | {ratio['time']:.2f} | {ratio['time']:.2f} | {peak} | | | |")
    note = ("The noise differs (native: comfy.sample.prepare_noise on the CPU from the seed; ours: our generator "
            "seeded with it), so the results are not compared value for value; their statistics are side by side.")
    return "\n".join(lines + ["", note])


def write_json(path: str, report: dict) -> None:
    """`report` to `path`, written whole or not at all (a temporary file renamed)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(partial, target)
