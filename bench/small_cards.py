"""Which transformer file to download for a small card: the memory plan (no weights: the released configs on meta,
`memory.weight_layout` for each file's bytes) of every candidate file on 8, 12 and 16 GB cards, at 768×512×121 and
960×544×121, for LTX-2.0, 2.3 and 2.5 (one-stage, the dev guider's 4 passes, the convolutional video decoder, the
text side streamed as the command line does, 32 GB of RAM).

The rule for "the file to download": the highest-quality candidate (QUALITY, best first) whose plan keeps at least
half of its blocks resident (the streamed rest is copied behind the compute: 27 of 48 streamed bf16 blocks cost 2 %
of a step on an H100, docs/performance.md); when none does, the one with the most resident blocks. Quality order:
the measured error of bench/quant_accuracy.py (bf16, int8 rowwise, Q8_0, fp8, MXFP8, then the GGUF K mixes by bits
per weight). The rule is conservative: on a small card a step computes for many seconds, behind which far more
streamed blocks are copied; the full table lists every candidate's plan for choosing quality over residency.

    python bench/small_cards.py            # the full table (docs/performance.md)
    python bench/small_cards.py --readme   # the README's table: card -> file -> expected peak
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402

from bench.memory_plan import RELEASED, released_side  # noqa: E402
from ltx2_core.memory.plan import (  # noqa: E402
    GB,
    TILE_BYTES_512,
    MemoryPlan,
    MemoryPlanError,
    WeightBytes,
    plan_memory,
    transformer_weight_bytes,
)
from ltx2_core.memory.weight_layout import gguf_layers, policy_layers  # noqa: E402
from ltx2_core.model.transformer.config import TransformerConfig  # noqa: E402
from ltx2_core.quant.int8 import INT8_ROWWISE  # noqa: E402
from ltx2_core.quant.mxfp8 import MXFP8_FORMAT  # noqa: E402

CARDS = (8, 12, 16)
SIZES = ((768, 512, 121), (960, 544, 121))
VERSIONS = ("2.0", "2.3", "2.5")
RAM_GB = 32
PASSES = 4
RESIDENT_SHARE = 0.5  # the rule's "at least half of the blocks resident"
# candidate files, best quality first (see the module docstring)
QUALITY = ("bf16", "int8", "GGUF Q8_0", "fp8", "MXFP8", "GGUF Q6_K", "GGUF Q5_K_M", "GGUF Q4_K_M", "GGUF Q3_K_M",
           "GGUF Q2_K")


def candidate_bytes(config: TransformerConfig, name: str) -> WeightBytes:
    """The transformer's bytes once the candidate file `name` is loaded (bf16 compute dtype)."""
    if name == "bf16":
        return transformer_weight_bytes(config)
    if name == "fp8":
        return transformer_weight_bytes(config, fp8=True)
    if name.startswith("GGUF "):
        return transformer_weight_bytes(config, layers=gguf_layers(name.removeprefix("GGUF ")))
    return transformer_weight_bytes(config, layers=policy_layers({"int8": INT8_ROWWISE, "MXFP8": MXFP8_FORMAT}[name]))


class Choice(NamedTuple):
    file: str
    plan: MemoryPlan | None  # None: refused
    note: str = ""  # the refusal's last clause


def plan_for(version: str, name: str, card_gb: int, width: int, height: int, frames: int,
             weights: WeightBytes | None = None) -> Choice:
    """The plan the command line makes for release `version` from candidate file `name` on a card of `card_gb`."""
    config = TransformerConfig.from_metadata(*RELEASED[version])
    decoders, side = released_side(version)
    weights = weights or candidate_bytes(config, name)
    try:
        plan = plan_memory(config, weights, card_gb * 10**9, frames, height, width, PASSES, fp8_available=False,
                           decoders=decoders, tile_bytes_512=TILE_BYTES_512, side=side, ram=RAM_GB * 10**9,
                           mappable=True)
    except MemoryPlanError as exc:
        return Choice(name, None, str(exc).split("; ")[-1])
    return Choice(name, plan)


def best(choices: list[Choice]) -> Choice:
    """The rule of the module docstring, over `choices` in QUALITY order."""
    fitting = [c for c in choices if c.plan is not None]
    enough = [c for c in fitting if c.plan.resident_blocks >= RESIDENT_SHARE * c.plan.weights.blocks]
    if enough:
        return enough[0]
    return max(fitting, key=lambda c: c.plan.resident_blocks, default=choices[-1])


def table(versions=VERSIONS, cards=CARDS, sizes=SIZES, files=QUALITY) -> list[dict]:
    """Every (release, size, card): each candidate's plan and the chosen one."""
    rows = []
    for version in versions:
        config = TransformerConfig.from_metadata(*RELEASED[version])
        weights = {name: candidate_bytes(config, name) for name in files}
        for width, height, frames in sizes:
            for card in cards:
                choices = [plan_for(version, n, card, width, height, frames, weights[n]) for n in files]
                rows.append(dict(version=version, size=(width, height, frames), card=card, choices=choices,
                                 best=best(choices)))
    return rows


def _cell(choice: Choice) -> str:
    plan = choice.plan
    if plan is None:
        return "—"
    return f"{plan.resident_blocks}/{plan.weights.blocks}, {plan.peak / GB:.1f}"


def full_table(rows: list[dict], files=QUALITY) -> str:
    lines = ["| release | size | card | " + " | ".join(files) + " | the file to download |",
             "|---|---|---|" + "---|" * len(files) + "---|"]
    for row in rows:
        width, height, frames = row["size"]
        lines.append(f"| {row['version']} | {width}×{height}×{frames} | {row['card']} GB | "
                     + " | ".join(_cell(c) for c in row["choices"]) + f" | {_chosen(row['best'])} |")
    return "\n".join(lines)


def _chosen(choice: Choice) -> str:
    if choice.plan is None:
        return f"none fits ({choice.note})"
    plan = choice.plan
    return (f"{choice.file}: {plan.resident_blocks}/{plan.weights.blocks} blocks resident, peak "
            f"{plan.peak / GB:.1f} GB, {plan.passes_per_forward} passes per forward")


def readme_table(rows: list[dict]) -> str:
    lines = ["| your card | release | 768×512×121 | 960×544×121 |", "|---|---|---|---|"]
    for card in sorted({r["card"] for r in rows}):
        for version in dict.fromkeys(r["version"] for r in rows):
            cells = []
            for row in (r for r in rows if r["card"] == card and r["version"] == version):
                choice = row["best"]
                cells.append("none fits" if choice.plan is None else
                             f"{choice.file} ({choice.plan.resident_blocks}/48 resident), peak "
                             f"{choice.plan.peak / GB:.1f} GB")
            lines.append(f"| {card} GB | LTX-{version} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--readme", action="store_true", help="only the README's table")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    rows = table()
    print(readme_table(rows) if args.readme else full_table(rows))


if __name__ == "__main__":
    main()
