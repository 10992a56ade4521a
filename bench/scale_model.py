"""Predicted end-to-end times of a two-stage run on 1, 2, 4 and 8 H100 / H200 / B200 for every cfg × sp × tp layout
(ltx2_core/parallel/cost_model.py), with the checks the model can be given:

    python bench/scale_model.py [--out bench/results/issue38] [--version 2.3] [--spread] [--lora] [--gloo]

1. one GPU: the model against forward times measured on one GPU: the H100 / H200 rows it was fed (8 and 48 blocks,
   batch 1: reproduced) and those it was not (2 and 4 passes batched, read off the curve at their FLOPs), and the
   H100's 48-block guided steps of the GPU suite (docs/performance.md);
2. `--gloo`: the collective bytes against what two real gloo ranks send (tests/distributed/traffic_rank.py), then
   the same formulas at the released sizes;
3. the predictions, each layout's (as the runtime runs it: stage 2 regrouped where that pays, `stage2_in`) and the
   fastest single layout against the fastest free per-stage pair (a tp change re-shards the weights);
4. the published anchors (sglang, TensorRT-LLM; shared/docs/performance.md) against the model in their layouts.

Every time here is a prediction, except the measured columns of section 1. Writes scale_model.json and
scale_model.md under --out.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from ltx2_core.parallel.config import ParallelConfig  # noqa: E402
from ltx2_core.parallel.cost_model import (Setting, best, forward_seconds, layouts, measured,  # noqa: E402
                                           released_config, single, two_stage)
from ltx2_core.parallel.hardware import GPUS, LINKS, MEASURED_STEPS_MS  # noqa: E402
from ltx2_core.parallel.traffic import Tokens, forward_traffic  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "issue38"
RUNS = {"768×512×121": (768, 512), "768×1280×121": (768, 1280)}
GPU_COUNTS = (1, 2, 4, 8)
# published end-to-end times (shared/docs/performance.md): (system, gpu, n, layout, run, steps, passes, seconds)
ANCHORS = (
    ("sglang #23221, TP4, compile", "H100", 4, (1, 1, 4), "768×512×121", 30, 2, 14.64),
    ("sglang #24529, Ulysses 2", "H200", 2, (1, 2, 1), "768×512×121", 30, 2, 13.38),
    ("sglang #24529, CFG 2 × Ulysses 2", "H200", 4, (2, 2, 1), "768×512×121", 30, 2, 8.19),
    ("TensorRT-LLM #16502, NVFP4, graphs", "B200", 8, (2, 4, 1), "768×1280×121", 40, 2, 2.13),
)


def check_one_gpu(version: str) -> list[dict]:
    """Section 1: measured one-GPU forwards against the model (fed rows must come back, the others are checks)."""
    rows = []
    for gpu, blocks in itertools.product(("H100", "H200"), (8, 48)):
        path = RESULTS / f"{gpu.lower()}_forward_{blocks}blocks.json"
        if not path.exists():
            continue
        for r in json.loads(path.read_text())["rows"]:
            config = replace(released_config(r["version"]), num_layers=blocks)
            tokens = Tokens(r["video_tokens"], 126)
            got = 1000 * forward_seconds(measured(r["version"], GPUS[gpu]), config, tokens, ParallelConfig(),
                                         GPUS[gpu], r["batch"])
            fed = r["batch"] == 1 and (blocks == 8 or r["version"] == "2.3")
            rows.append({"gpu": gpu, "what": f"forward, {blocks} blocks, {r['batch']} pass(es)",
                         "version": r["version"], "video_tokens": r["video_tokens"], "fed": fed,
                         "measured_ms": r["ms"], "model_ms": round(got, 1), "error": f"{got / r['ms'] - 1:+.1%}"})
    for v, (tokens, ms) in MEASURED_STEPS_MS.items():
        config = released_config(v)
        got = 4000 * forward_seconds(measured(v, GPUS["H100"]), config, Tokens(tokens, 126), ParallelConfig(),
                                     GPUS["H100"])
        rows.append({"gpu": "H100", "what": "guided step, 48 blocks, 4 passes one at a time", "version": v,
                     "video_tokens": tokens, "fed": False, "measured_ms": ms, "model_ms": round(got, 1),
                     "error": f"{got / ms - 1:+.1%}"})
    return [r for r in rows if r["version"] == version or r["gpu"] == "H100"]


def check_gloo() -> list[dict]:
    """Section 2: two gloo ranks' bytes against the model (the test's run), then the released sizes' bytes."""
    rows = []
    for shape, version in (("1x2x1", "2.3"), ("1x1x2", "2.3"), ("1x1x2", "2.5")):
        with tempfile.TemporaryDirectory() as tmp:
            outs = [Path(tmp) / f"rank{r}.json" for r in range(2)]
            procs = [subprocess.Popen([sys.executable, str(ROOT / "tests/distributed/traffic_rank.py"), str(r), "2",
                                       str(Path(tmp) / "init"), shape, version, str(outs[r])]) for r in range(2)]
            if any(p.wait(timeout=240) for p in procs):
                raise SystemExit(f"a gloo rank of {shape} failed")
            result = json.loads(outs[0].read_text())
        from distributed.test_traffic import ran  # the tiny config the rank ran

        layout = ParallelConfig(*(int(n) for n in shape.split("x")))
        tokens = Tokens(result["video_tokens"], result["audio_tokens"], result["text_tokens"])
        model = forward_traffic(ran(result["config"]), tokens, layout, element=result["element_size"])
        rows.append({"layout": shape, "version": version, "video_tokens": tokens.video,
                     "gloo_sp_bytes": result["sent"]["sp_bytes"], "model_sp_bytes": model.sp_bytes,
                     "gloo_tp_bytes": result["sent"]["tp_bytes"],
                     "model_tp_bytes": model.tp_bytes})
    for shape in ((1, 2, 1), (1, 4, 1), (1, 1, 2), (1, 1, 4), (1, 2, 2)):
        layout = ParallelConfig(*shape)
        for tokens in (1536, 6144, 15360):
            t = forward_traffic(released_config("2.3"), Tokens(tokens, 126), layout)
            rows.append({"layout": "x".join(map(str, shape)), "version": "2.3 released", "video_tokens": tokens,
                         "model_sp_bytes": t.sp_bytes, "model_tp_bytes": t.tp_bytes})
    return rows


def predictions(version: str, setting_for) -> list[dict]:
    """Section 3: per run, GPU and count, the fastest single layout, the runner-up, the slowest, the fastest pair."""
    config = released_config(version)
    rows = []
    for run, (width, height) in RUNS.items():
        workload = two_stage(width, height)
        for gpu in GPUS.values():
            setting = setting_for(gpu)
            base = single(workload, ParallelConfig(), config, setting).seconds
            for n in GPU_COUNTS:
                ranked = sorted((single(workload, c, config, setting).seconds, c.shape) for c in layouts(n, 4))
                one, pair = best(workload, n, config, setting)
                rows.append({"run": run, "gpu": gpu.name, "link": setting.link.name, "gpus": n,
                             "fastest": _shape(ranked[0][1]), "seconds": round(ranked[0][0], 2),
                             "speed_up": round(base / ranked[0][0], 2),
                             "runner_up": _shape(ranked[1][1]) if len(ranked) > 1 else "–",
                             "margin": f"{ranked[1][0] / ranked[0][0] - 1:+.0%}" if len(ranked) > 1 else "–",
                             "slowest": f"{_shape(ranked[-1][1])} {ranked[-1][0]:.1f}",
                             "stage1": round(one.stages[0].seconds, 2), "stage2": round(one.stages[1].seconds, 2),
                             "stage2_in": _shape(one.stages[1].layout.shape),
                             "pair": f"{_shape(pair.stages[0].layout.shape)} → {_shape(pair.stages[1].layout.shape)}",
                             "pair_seconds": round(pair.seconds, 2),
                             "all": {_shape(s): round(t, 2) for t, s in ranked}})
    return rows


def anchors(version: str, setting_for) -> list[dict]:
    """Section 4: each published time against the model in the same layout, steps and passes, and the model's
    fastest layout for that run."""
    config = released_config(version)
    rows = []
    for system, gpu, n, shape, run, steps, passes, seconds in ANCHORS:
        width, height = RUNS[run]
        workload = two_stage(width, height, steps=steps, passes=passes)
        setting = setting_for(GPUS[gpu])
        theirs = single(workload, ParallelConfig(*shape), config, setting).seconds
        ranked = sorted((single(workload, c, config, setting).seconds, c.shape) for c in layouts(n, passes))
        rows.append({"anchor": system, "gpus": f"{n}×{gpu}", "run": f"{run}, {steps}+3 steps, {passes} passes",
                     "published_s": seconds, "model_same_layout_s": round(theirs, 2),
                     "model_over_published": round(theirs / seconds, 2),
                     "model_fastest": f"{_shape(ranked[0][1])} {ranked[0][0]:.2f} s"})
    return rows


def _shape(shape: tuple[int, int, int]) -> str:
    return "cfg {} × sp {} × tp {}".format(*shape)


def markdown(rows: list[dict], skip: tuple[str, ...] = ("all",)) -> str:
    keys = [k for k in rows[0] if k not in skip]
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(_cell(r.get(k)) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, float) and value > 1e5:
        return f"{value / 1e6:,.2f} MB" if value < 1e9 else f"{value / 1e9:,.2f} GB"
    return "–" if value is None else str(value)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(RESULTS))
    p.add_argument("--version", default="2.3", choices=("2.3", "2.5"))
    p.add_argument("--spread", action="store_true", help="prompts over 2 ranks, decode tiles over all (items 1-2)")
    p.add_argument("--lora", action="store_true", help="count stage 2's LoRA fusion (an 8 s estimate; tp divides it)")
    p.add_argument("--link", choices=sorted(LINKS), help="one link for every GPU (default: each GPU's own board's)")
    p.add_argument("--gloo", action="store_true", help="also run the 2-rank gloo byte check (~40 s on 2 cores)")
    args = p.parse_args(argv)

    def setting_for(gpu):
        return Setting(gpu=gpu, link=LINKS[args.link or gpu.intra_link], spread=args.spread, lora_fuse=args.lora)

    sections = {"one_gpu": check_one_gpu(args.version)}
    if args.gloo:
        sections["gloo"] = check_gloo()
    sections["predictions"] = predictions(args.version, setting_for)
    sections["anchors"] = anchors(args.version, setting_for)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = f"_{args.version}" + ("_spread" if args.spread else "") + ("_lora" if args.lora else "") + (
        f"_{args.link}" if args.link else "")
    report = {"version": args.version, "spread": args.spread, "lora": args.lora, "link": args.link,
              "sections": sections}
    text = "\n\n".join(f"## {name}\n\n{markdown(rows)}" for name, rows in sections.items())
    (out / f"scale_model{suffix}.json").write_text(json.dumps(report, indent=1, ensure_ascii=False))
    (out / f"scale_model{suffix}.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
