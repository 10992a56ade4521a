"""The one-GPU forward times the layout cost model is fed (ltx2_core/parallel/cost_model.py), on whatever GPU runs it.

    python bench/scale_forward.py --out DIR [--versions 2.3,2.5] [--layers 8]   # a CUDA GPU, bf16, released widths
    python bench/scale_forward.py --quick --out DIR                              # CPU smoke run, tiny structure

Ours only (no reference needed, so it runs on a bare GPU image): one forward of the released structure's first
`--layers` blocks at the token counts of both two-stage runs (stage 1 of 768×512 and of 768×1280: 1,536 and 3,840
video tokens; stage 2: 6,144 and 15,360), batch 1, and at the stage-1 sizes also with 2 and 4 passes batched in one
forward, which checks the model's rule that a batch of k passes costs the curve's time at k times the FLOPs. Times
are medians of CUDA-event timings after warm-up. Writes `scale_forward.json`: {"gpu", "torch", "rows": [{version,
size, video_tokens, batch, blocks, ms}]}; `bench/scale_model.py --measured` reads it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from suite_measure import median_ms  # noqa: E402
from suite_models import clip, random_transformer, suite_config  # noqa: E402

SIZES = ((121, 256, 384), (121, 384, 640), (121, 512, 768), (121, 768, 1280))  # frames, height, width
QUICK_SIZES = ((9, 64, 96), (17, 64, 128))
BATCHES = (1, 2, 4)  # at the stage-1 sizes (the first two)


def rows_for(version: str, layers: int, quick: bool, device: torch.device, dtype: torch.dtype,
             repeats: int) -> list[dict]:
    config = suite_config(version, layers, quick)
    model = random_transformer(config, device, dtype)
    rows = []
    sizes = QUICK_SIZES if quick else SIZES
    for index, size in enumerate(sizes):
        c = clip(config, size, 16 if quick else 1024, device, dtype)
        for batch in BATCHES if index < 2 else (1,):
            text = [t.expand(batch, -1, -1) for t in (c.text.video, c.text.audio)]
            run = model.prepare_run(c.video_positions, c.audio_positions, *text)
            video, audio = c.streams(batch)
            with torch.no_grad():
                ms = median_ms(lambda: model(video, audio, run), device, repeats)
            rows.append({"version": version, "size": "×".join(map(str, size[::-1])), "video_tokens": c.tokens[0],
                         "batch": batch, "blocks": layers, "ms": round(ms, 2)})
            print(rows[-1], flush=True)
    return rows  # the model is freed on return


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--versions", default="2.3,2.5")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="tiny structure on the CPU: keeps the script working")
    args = p.parse_args(argv)
    cuda = torch.cuda.is_available() and not args.quick
    if not cuda and not args.quick:
        raise SystemExit("needs a CUDA GPU (the released widths); on the CPU run --quick")
    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    layers = args.layers if cuda else 2
    report = {"gpu": torch.cuda.get_device_name(device) if cuda else "CPU", "torch": torch.__version__,
              "date": datetime.date.today().isoformat(), "quick": not cuda, "rows": []}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for version in args.versions.split(","):
        report["rows"] += rows_for(version, layers, not cuda, device, dtype, args.repeats)
        if cuda:
            torch.cuda.empty_cache()
        (out / "scale_forward.json").write_text(json.dumps(report, indent=1))  # after each version
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
