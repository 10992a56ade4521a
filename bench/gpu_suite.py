"""Every GPU measurement of docs/performance.md in one command and one process: prints markdown tables, writes JSON.

    python bench/gpu_suite.py [--out DIR] [--sections forward,step,...]   # a CUDA GPU: bf16, released widths
    python bench/gpu_suite.py --quick [--out DIR]                        # CPU smoke run on the tiny structure

Sections (bench/suite_sections.py): `forward` (one pass, ours vs ltx_core vs diffusers at 1,536 / 6,144 / 15,360
video tokens on an 8-block slice of the released LTX-2.0 and 2.3 structures, with TFLOP/s against 800), `step` (one
guided step of the 48-block model at 768×512×121: the four dev-guider passes batched, one at a time, and the
reference loop; peak memory), `launch` (a whole guided step at 256×256×9 and 384×256×25: eager, CUDA graph,
per-block compile, against the FLOP time), `syncs` (a whole denoising stage under sync debug mode and the
profiler), `recompiles` (per-block compile, then every guidance scale changed), `memory` (a guided step per weight
mode under a capped device memory), `kernels` (bench/suite_kernels.py: ours vs comfy-kitchen's fused kernels, a
one-block forward, the self-attention, the fused ops alone), `stage1` and `profile` (bench/suite_stage1.py: a guided
step at 1,536 video tokens eager / CUDA graph / compile + graph against its FLOP time, batched vs one pass per forward
at 1,536 and 6,144 tokens; a kernel table of one forward per release), `fp8` (bench/suite_fp8.py: the slice's
forward in bf16 and under each fp8 matmul recipe, and each recipe's quantiser and GEMM alone), `attention`
(bench/suite_attention.py: every attention backend on the transformer's attention shapes, ms and error against fp32
math, auto's choice against the measured fastest), `cache` (bench/suite_cache.py: a whole stage at the release's
steps with and without step caching). Times are medians of repeated runs
after warm-up, taken with CUDA events on a GPU.

Needs the references beside the package's requirements: pip install --no-deps ltx-core==1.0.0 ltx-pipelines==1.0.0
and pip install diffusers==0.42.1 (tests/requirements.txt lists them).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from suite_models import RELEASED  # noqa: E402
from suite_fp8 import fp8_rows  # noqa: E402
from suite_attention import attention_rows  # noqa: E402
from suite_kernels import kernel_rows  # noqa: E402
from suite_cache import cache_rows  # noqa: E402
from suite_sections import SECTIONS, Settings  # noqa: E402
from suite_stage1 import SECTIONS as STAGE1_SECTIONS  # noqa: E402
from support.reference import import_ltx_pipelines  # noqa: E402

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
SECTIONS = {**SECTIONS, "kernels": kernel_rows, **STAGE1_SECTIONS, "fp8": fp8_rows, "attention": attention_rows,
            "cache": cache_rows}
# column order and number formats of each section's table (keys missing from a row print as '–')
FORMATS = {float: "{:.3g}", int: "{:,}"}


def settings(args: argparse.Namespace) -> Settings:
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type != "cuda" and not args.quick:
        raise SystemExit("the full suite needs a CUDA GPU (37 GB of weights at full width); on the CPU run --quick")
    dtype = DTYPES[args.dtype] if args.dtype else (torch.bfloat16 if device.type == "cuda" else torch.float32)
    versions = tuple(args.versions.split(","))
    if args.quick:
        return Settings(True, device, dtype, versions, slice_layers=2, full_layers=3,
                        forward_sizes=((9, 64, 96), (17, 64, 128)), step_size=(9, 64, 96),
                        launch_sizes=((9, 64, 64), (9, 64, 96)), text_tokens=16, steps=2,
                        repeats=args.repeats or 2, warmup=1, compile_backend=args.compile_backend or "eager")
    return Settings(False, device, dtype, versions, slice_layers=args.layers, full_layers=48,
                    forward_sizes=((121, 256, 384), (121, 512, 768), (121, 768, 1280)), step_size=(121, 512, 768),
                    launch_sizes=((9, 256, 256), (25, 256, 384)), text_tokens=1024, steps=4,
                    repeats=args.repeats or 10, warmup=3, compile_backend=args.compile_backend or "inductor")


def markdown(rows: list[dict]) -> str:
    """One markdown table with a column per key (in first-seen order)."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(key)) for key in columns) + " |")
    return "\n".join(lines)


def _cell(value: object) -> str:
    if value is None:
        return "–"
    fmt = FORMATS.get(type(value))
    return fmt.format(value) if fmt else str(value)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def _write(out: Path, report: dict, text: list[str]) -> None:
    (out / "gpu_suite.json").write_text(json.dumps(report, indent=1))
    (out / "gpu_suite.md").write_text("\n".join(text) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny structure and sizes: a CPU smoke run of every section")
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {', '.join(SECTIONS)}")
    p.add_argument("--versions", default="2.0,2.3", help="model structures: any of 2.0, 2.3, 2.5")
    p.add_argument("--layers", type=int, default=8, help="blocks of the full-width slice (forward, syncs, recompiles)")
    p.add_argument("--repeats", type=int, help="timed runs per figure (default 10; quick 2)")
    p.add_argument("--device", help="default: cuda when available")
    p.add_argument("--dtype", choices=sorted(DTYPES), help="default: bfloat16 on CUDA, float32 on the CPU")
    p.add_argument("--compile-backend", help="torch.compile backend of per-block compile (default inductor; quick: "
                   "eager)")
    p.add_argument("--out", default="gpu_suite_results", help="folder for gpu_suite.json and gpu_suite.md")
    p.add_argument("--budget", type=float, help="seconds: start no section after this much time (a device call's "
                   "limit); the sections left are listed as skipped")
    args = p.parse_args(argv)
    chosen = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown or any(v not in RELEASED for v in args.versions.split(",")):
        p.error(f"unknown sections {unknown} or versions {args.versions!r}")
    s = settings(args)
    import_ltx_pipelines()  # the reference loop; imports ltx_core too
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"device": device_name(s.device), "torch": torch.__version__, "dtype": str(s.dtype).removeprefix("torch."),
              "date": datetime.date.today().isoformat(), "quick": s.quick, "sections": {}, "seconds": {}}
    text = [f"# GPU suite: {report['device']}, torch {report['torch']}, {report['dtype']}, {report['date']}"
            + (" (quick: tiny structure)" if s.quick else "")]
    begun = time.perf_counter()
    for name in chosen:
        if args.budget is not None and time.perf_counter() - begun > args.budget:
            report["skipped"] = chosen[chosen.index(name):]
            text.append(f"\nskipped, over the {args.budget:g} s budget: {', '.join(report['skipped'])}")
            break
        start = time.perf_counter()
        try:
            rows = SECTIONS[name](s)
        except Exception as error:  # one GPU loan runs every section: a failing one must not lose the others
            if s.quick:  # the CPU smoke run (and its test) fails on any error
                raise
            traceback.print_exc()
            rows = [{"error": f"{type(error).__name__}: {error}"[:500]}]
        report["sections"][name], report["seconds"][name] = rows, round(time.perf_counter() - start, 1)
        text.append(f"\n## {name}\n\n{markdown(rows)}")
        print(text[-1], flush=True)
        _write(out, report, text)  # after every section: a call stopped at its limit keeps what is done
    _write(out, report, text)
    print(f"\nwrote {out / 'gpu_suite.json'} and {out / 'gpu_suite.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
