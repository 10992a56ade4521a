"""The GPU suite's stage-1 sections (issue 36): a guided step at the size of a two-stage run's first stage, and what
its kernels are.

* `stage1`: per release, one guided step of the full-depth model (48 blocks, the release's passes) at 1,536 video
  tokens (384×256×121, the suite's first forward size): eager, captured as a CUDA graph (`CudaGraphStep`, what
  `cuda_graphs` "auto" runs), per-block compile + graph, each against the step's FLOP time at 800 TFLOP/s (goal:
  the best within 1.25×; compile + graph left empty, "–", once the section has run COMPILE_ALLOWANCE_S). For the
  first release, the passes batched vs one pass per forward at 1,536 and 6,144 tokens (the first two forward
  sizes), with their peak memory, and the crossover row `memory.pass_policy.CROSSOVER_TOKENS` takes for this
  device's compute capability (the smallest measured token count where one pass at a time was not slower).
* `profile`: per release, a torch.profiler table of one forward (one pass) of an 8-block slice (`--layers`) at
  1,536 tokens: the top kernels by device time (CPU: ops by self CPU time) with their count per block, and a
  summary row with the kernels per block and the op census's count and roofline (`bench/op_census.py`) beside
  it: what makes 2.3 and 2.5 slower than 2.0 at this size.

Under --quick both run on the CPU on the tiny structure; the "graph" variants then replay with
`compile.EagerReplay` (the captured step's bookkeeping, no speed-up to expect).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import torch
from op_census import census, extra_ops, summary
from suite_measure import median_ms, peak_extra_bytes, step_flop_ms
from suite_models import clip, random_transformer, suite_config
from suite_sections import _compiled, _free, _guided

from ltx2_core.compile import CudaGraphStep, EagerReplay
from ltx2_core.memory.pass_policy import CROSSOVER_TOKENS, device_capability, policy_passes

Row = dict[str, Any]
GOAL = 1.25  # a stage-1 step within 1.25× of its FLOP time
TOP_KERNELS = 8
COMPILE_ALLOWANCE_S = 150  # no new per-block compile once the section has run this long (a device call's limit)


def _size(size: tuple[int, int, int]) -> str:
    return "×".join(map(str, size[::-1]))


def _captured(s) -> CudaGraphStep:
    """The step as `cuda_graphs` captures it (`EagerReplay` off CUDA)."""
    return CudaGraphStep(backend=None if s.device.type == "cuda" else EagerReplay())


def _replay(step: CudaGraphStep, guided):
    return lambda: step(guided.setup, guided.video, guided.audio, guided.sigmas[0], guided.sigmas[1])


def _ms(s, fn) -> float:
    """`median_ms` with the run's repeats (quick: one run, no warm-up: a smoke run of many variants)."""
    return median_ms(fn, s.device, 1, 0) if s.quick else median_ms(fn, s.device, s.repeats, s.warmup)


@torch.no_grad()
def stage1(s) -> list[Row]:
    """Per release: the step's variants (compile + graph while the section is inside COMPILE_ALLOWANCE_S; inductor
    takes about a minute per release), and for the first release the passes at both sizes (the policy is per
    device)."""
    rows: list[Row] = []
    sizes, begun = s.forward_sizes[:2], time.perf_counter()  # 1,536 and 6,144 video tokens in full mode
    for version in s.versions:
        config = suite_config(version, s.full_layers, s.quick)
        model = random_transformer(config, s.device, s.dtype)
        c = clip(config, sizes[0], s.text_tokens, s.device, s.dtype)
        guided = _guided(model, c, s.steps)
        passes = len(guided.setup.runner.passes)
        row = {"version": version, "measure": "step", "size": _size(sizes[0]), "video_tokens": c.tokens[0],
               "blocks": config.num_layers, "passes": passes, "flop_ms": step_flop_ms(config, c.tokens, passes),
               "eager_ms": _ms(s, guided), "graph_ms": _ms(s, _replay(_captured(s), guided)), "compile_graph_ms": None}
        rows.append(row)  # completed below: its columns first in the table
        if version == s.versions[0]:
            rows += [_passes_row(s, model, version, size) for size in sizes]
        if s.quick or time.perf_counter() - begun < COMPILE_ALLOWANCE_S:
            with _compiled(model, s.compile_backend):
                row["compile_graph_ms"] = _ms(s, _replay(_captured(s), guided))
        best = min(ms for ms in (row["eager_ms"], row["graph_ms"], row["compile_graph_ms"]) if ms is not None)
        row |= {"best_vs_flop": best / row["flop_ms"], "goal_met": best <= GOAL * row["flop_ms"]}
        del guided, model
        _free(s.device)
    return rows + [_crossover_row(s, rows)]


def _passes_row(s, model, version: str, size: tuple[int, int, int]) -> Row:
    c = clip(model.config, size, s.text_tokens, s.device, s.dtype)
    batched, one = _guided(model, c, s.steps), _guided(model, c, s.steps, passes_per_forward=1)
    passes = len(batched.setup.runner.passes)
    row = {"version": version, "measure": "passes", "size": _size(size), "video_tokens": c.tokens[0],
           "passes": passes, "batched_ms": _ms(s, batched), "one_pass_ms": _ms(s, one),
           # the peaks (taken by the `step` section's helper) are left out of a quick run: it counts every tensor
           "batched_peak_gib": None if s.quick else peak_extra_bytes(batched, s.device) / 2**30,
           "one_pass_peak_gib": None if s.quick else peak_extra_bytes(one, s.device) / 2**30}
    row["policy_passes"] = policy_passes(device_capability(s.device), c.tokens[0], passes)
    row["policy_right"] = (row["policy_passes"] == 1) == (row["one_pass_ms"] <= row["batched_ms"])
    return row


def _crossover_row(s, rows: list[Row]) -> Row:
    """The smallest measured token count from which one pass at a time was not slower for every release (None:
    batching won everywhere measured), beside the table's entry for this device."""
    capability = device_capability(s.device)
    measured = sorted({r["video_tokens"] for r in rows if r["measure"] == "passes"})
    wins = [t for t in measured if all(r["one_pass_ms"] <= r["batched_ms"] for r in rows
                                       if r["measure"] == "passes" and r["video_tokens"] == t)]
    return {"measure": "crossover", "capability": None if capability is None else ".".join(map(str, capability)),
            "one_at_a_time_from": wins[0] if wins else None,
            "table_now": CROSSOVER_TOKENS.get(capability) if capability is not None else None}


@torch.no_grad()
def profile(s) -> list[Row]:
    size, blocks = s.forward_sizes[0], s.slice_layers
    rows, counted = [], {}
    for version in s.versions:
        config = suite_config(version, blocks, s.quick)
        wall_ms, kernels = _profiled_forward(s, random_transformer(config, s.device, s.dtype), size)
        _free(s.device)
        total = sum(ms for _, _, ms in kernels.values())
        counted[version] = census(version, blocks, size)
        counts = summary(counted[version], blocks)
        rows.append({"version": version, "kernel": "(all)", "size": _size(size), "blocks": blocks,
                     "count_per_block": sum(n for _, n, _ in kernels.values()) / blocks, "ms": total,
                     "wall_ms": wall_ms, "census_ops_per_block": counts["ops_per_block"],
                     "census_roofline_ms": counts["roofline_ms"], "census_flop_ms": counts["flop_ms"],
                     "census_beyond_first": str(extra_ops(counted[version], counted[s.versions[0]], blocks))})
        for name, count, ms in sorted(kernels.values(), key=lambda k: -k[2])[:TOP_KERNELS]:
            rows.append({"version": version, "kernel": name[:80], "count_per_block": count / blocks, "ms": ms,
                         "share": ms / total if total else None})
    return rows


def _profiled_forward(s, model, size: tuple[int, int, int]) -> tuple[float, dict[str, tuple[str, int, float]]]:
    """One pass's forward at `size`: its wall time (ms) and its kernels under the profiler (`_kernels`)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    cuda = s.device.type == "cuda"
    c = clip(model.config, size, s.text_tokens, s.device, s.dtype)
    run = model.prepare_run(c.video_positions, c.audio_positions, c.text.video, c.text.audio)
    video, audio = c.streams()
    wall_ms = _ms(s, lambda: model(video, audio, run))
    with profiler(activities=[ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * cuda) as prof:
        model(video, audio, run)
        if cuda:
            torch.cuda.synchronize(s.device)
    return wall_ms, _kernels(prof, cuda)


def _kernels(prof, cuda: bool) -> dict[str, tuple[str, int, float]]:
    """(name, count, ms) of each kernel by device time (CUDA), or each op by self CPU time."""
    from torch.autograd import DeviceType

    found: Counter = Counter()
    counts: Counter = Counter()
    for event in prof.key_averages():
        if cuda and event.device_type != DeviceType.CUDA:
            continue
        ms = (event.self_device_time_total if cuda else event.self_cpu_time_total) / 1e3
        if ms > 0 or cuda:
            found[event.key] += ms
            counts[event.key] += event.count
    return {name: (name, counts[name], found[name]) for name in found}


SECTIONS = {"stage1": stage1, "profile": profile}
