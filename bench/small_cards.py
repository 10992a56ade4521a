"""Which transformer file to download for a small card: the memory plan (no weights: the released configs on meta,
`memory.weight_layout` for each file's bytes) of every candidate file on 8, 12 and 16 GB cards, at 768×512×121 and
960×544×121, for LTX-2.0, 2.3 and 2.5 (one-stage, the dev guider's 4 passes, the convolutional video decoder with
the audio decoder and vocoder beside it, the text side streamed as the command line does, 32 GB of RAM).

The GGUF files are sized as llama-quantize with ComfyUI-GGUF's lcpp.patch makes them (`weight_layout.GGUF_MIXES`):
`--sizes` prints each conversion's file (what people download) and what it loads as. `--text off` plans with the
text side off the card (the prompt encoded on the CPU, or while the transformer is parked: not a mode of the pack
today), to show what that would change on small cards.

The rule for "the file to download": the highest-quality candidate (QUALITY, best first) whose plan fits (card and
RAM) and whose streamed blocks copy in at most a quarter of the step's compute (COPY_SHARE): the copies run behind
the compute (27 of 48 streamed bf16 blocks cost 2 % of a step on an H100, docs/performance.md). The step's compute is
a lower bound (2 · parameters · video tokens · passes at CARD_FLOPS, faster than any 8-16 GB card's dense bf16) and
its copies an upper bound (every streamed block once per forward at PCIE, a PCIe 4.0 x8 card's, from pinned RAM;
at DISK, an NVMe drive's, when the streamed blocks do not fit the RAM and are read from the memory-mapped file), so
the share is overstated; when no file passes, the fitting one with the least copying. Quality order: the measured error
of bench/quant_accuracy.py (bf16, Q8_0, int8 rowwise, fp8, MXFP8, then the GGUF K mixes by bits per weight).

    python bench/small_cards.py               # the full table (docs/performance.md)
    python bench/small_cards.py --readme      # the README's table: card -> file -> expected peak
    python bench/small_cards.py --sizes       # the GGUF files' sizes (docs/small_cards/gguf.md)
    python bench/small_cards.py --text off    # the full table with the text side off the card
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
from ltx2_core.geometry import video_tokens  # noqa: E402
from ltx2_core.memory.sizes import SideBytes  # noqa: E402
from ltx2_core.memory.weight_layout import gguf_file_bytes, gguf_layers, policy_layers  # noqa: E402
from ltx2_core.model.audio_vae.config import AudioDecoderConfig, VocoderConfig  # noqa: E402
from ltx2_core.model.audio_vae.decoder import AudioDecoder  # noqa: E402
from ltx2_core.model.audio_vae.vocoder import build_vocoder  # noqa: E402
from ltx2_core.model.transformer import LTX2Transformer  # noqa: E402
from ltx2_core.model.transformer.config import TransformerConfig  # noqa: E402
from ltx2_core.quant.int8 import INT8_ROWWISE  # noqa: E402
from ltx2_core.quant.mxfp8 import MXFP8_FORMAT  # noqa: E402

CARDS = (8, 12, 16)
SIZES = ((768, 512, 121), (960, 544, 121))
VERSIONS = ("2.0", "2.3", "2.5")
RAM_GB = 32
PASSES = 4
COPY_SHARE = 0.25  # the rule's "streamed copies in at most a quarter of the step's compute"
CARD_FLOPS = 60e12  # dense bf16 FLOP/s, above any 8-16 GB card's (RTX 3060 ~25e12, 4070 ~58e12): compute's lower bound
PCIE = 16e9  # bytes a second host -> device, a PCIe 4.0 x8 card's (x16 cards copy twice as fast)
DISK = 3e9  # bytes a second from an NVMe drive: streamed blocks that do not fit the RAM come from the file
# candidate files, best quality first (see the module docstring)
QUALITY = ("bf16", "GGUF Q8_0", "int8", "fp8", "MXFP8", "GGUF Q6_K", "GGUF Q5_K_M", "GGUF Q4_K_M", "GGUF Q3_K_M",
           "GGUF Q2_K")
SIZES_MIXES = ("Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q4_K_M", "Q4_K_S", "Q4_0", "Q3_K_M", "Q3_K_S", "Q2_K")
# the released vocoders (docs ltx2_spec §4): 2.0's HiFi-GAN (the configurator's defaults, 55.6 M parameters); 2.3's
# BigVGAN-v2 at 1536 channels with its 512-channel bandwidth extension to 48 kHz (128.5 M), taken for 2.5's too
_AMP = {"resblock": "AMP1", "stereo": True, "activation": "snakebeta", "resblock_kernel_sizes": [3, 7, 11],
        "resblock_dilation_sizes": [[1, 3, 5]] * 3, "use_tanh_at_final": False, "use_bias_at_final": False}
_BWE_VOCODER = {
    "vocoder": {**_AMP, "upsample_initial_channel": 1536, "upsample_rates": [5, 2, 2, 2, 2, 2],
                "upsample_kernel_sizes": [11, 4, 4, 4, 4, 4]},
    "bwe": {**_AMP, "upsample_initial_channel": 512, "upsample_rates": [6, 5, 2, 2, 2],
            "upsample_kernel_sizes": [12, 11, 4, 4, 4], "apply_final_activation": False, "input_sampling_rate": 16000,
            "output_sampling_rate": 48000, "hop_length": 80, "n_fft": 512, "win_size": 512, "num_mels": 64}}
RELEASED_VOCODERS = {"2.0": {"resblock": "1", "stereo": True}, "2.3": _BWE_VOCODER, "2.5": _BWE_VOCODER}


class TextOffCard(SideBytes):
    """The text side's host memory as today, its device stage not stacked on the transformer's weights (the
    prompt encoded on the CPU, or on the card while the transformer is parked)."""

    @property
    def encoding(self) -> int:
        return 0


def _meta_bytes(module: torch.nn.Module) -> int:
    return sum(t.numel() * 2 for t in (*module.parameters(), *module.buffers()))  # bf16


def released_decoders(version: str, text: str = "on") -> tuple[int, SideBytes]:
    """(the video decoder, the audio decoder and the vocoder in bf16, as `plan.decoder_bytes` counts them; the text
    side, on the card or `text` "off" it)."""
    video, side = released_side(version)
    with torch.device("meta"):
        audio = AudioDecoder(AudioDecoderConfig())  # the released ddconfig is the configurator's default (31.9 M)
        vocoder = build_vocoder(VocoderConfig.from_metadata(RELEASED_VOCODERS[version]))
    return video + _meta_bytes(audio) + _meta_bytes(vocoder), TextOffCard(*side) if text == "off" else side


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
             weights: WeightBytes | None = None, text: str = "on") -> Choice:
    """The plan the command line makes for release `version` from candidate file `name` on a card of `card_gb`
    (`text` "off": with the text side off the card)."""
    config = TransformerConfig.from_metadata(*RELEASED[version])
    decoders, side = released_decoders(version, text)
    weights = weights or candidate_bytes(config, name)
    try:
        plan = plan_memory(config, weights, card_gb * 10**9, frames, height, width, PASSES, fp8_available=False,
                           decoders=decoders, tile_bytes_512=TILE_BYTES_512, side=side, ram=RAM_GB * 10**9,
                           mappable=True)
    except MemoryPlanError as exc:
        return Choice(name, None, str(exc).split("; ")[-1])
    return Choice(name, plan)


def compute_seconds(config: TransformerConfig, width: int, height: int, frames: int) -> float:
    """A step's compute at CARD_FLOPS: 2 · the transformer's parameters · video tokens · PASSES (a lower bound:
    attention and the audio tokens left out)."""
    params = transformer_weight_bytes(config, torch.float32).total / 4
    return 2 * params * video_tokens(frames, height, width) * PASSES / CARD_FLOPS


def copy_seconds(plan: MemoryPlan) -> float:
    """A step's streamed copies: every streamed block once per forward, at PCIE from pinned RAM, else at DISK."""
    forwards = -(-PASSES // plan.passes_per_forward)
    return plan.streamed_blocks * plan.weights.per_block * forwards / (PCIE if plan.pin else DISK)


def best(choices: list[Choice], compute: float) -> Choice:
    """The rule of the module docstring, over `choices` in QUALITY order; `compute`: `compute_seconds`."""
    fitting = [c for c in choices if c.plan is not None]
    hidden = [c for c in fitting if copy_seconds(c.plan) <= COPY_SHARE * compute]
    if hidden:
        return hidden[0]
    return min(fitting, key=lambda c: copy_seconds(c.plan), default=choices[-1])


def table(versions=VERSIONS, cards=CARDS, sizes=SIZES, files=QUALITY, text: str = "on") -> list[dict]:
    """Every (release, size, card): each candidate's plan and the chosen one."""
    rows = []
    for version in versions:
        config = TransformerConfig.from_metadata(*RELEASED[version])
        weights = {name: candidate_bytes(config, name) for name in files}
        for width, height, frames in sizes:
            for card in cards:
                choices = [plan_for(version, n, card, width, height, frames, weights[n], text) for n in files]
                compute = compute_seconds(config, width, height, frames)
                rows.append(dict(version=version, size=(width, height, frames), card=card, choices=choices,
                                 compute=compute, best=best(choices, compute)))
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
            f"{plan.peak / GB:.1f} GB, {plan.passes_per_forward} passes per forward, copies ≤ "
            f"{copy_seconds(plan):.1f} s a step")


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


def sizes_table(versions=VERSIONS, mixes=SIZES_MIXES) -> str:
    """Each release's GGUF conversions: the file's tensors and what the plan counts once loaded (bf16), in GB."""
    lines = ["| release | " + " | ".join(mixes) + " |", "|---|" + "---|" * len(mixes)]
    for version in versions:
        config = TransformerConfig.from_metadata(*RELEASED[version])
        with torch.device("meta"):
            model = LTX2Transformer(config).to(torch.bfloat16)
        cells = [f"{gguf_file_bytes(model, mix) / GB:.2f} / "
                 f"{transformer_weight_bytes(config, layers=gguf_layers(mix)).total / GB:.2f}" for mix in mixes]
        lines.append(f"| {version} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--readme", action="store_true", help="only the README's table")
    parser.add_argument("--sizes", action="store_true", help="only the GGUF files' sizes")
    parser.add_argument("--text", choices=("on", "off"), default="on", help="the text side on or off the card")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    if args.sizes:
        print(sizes_table())
        return
    rows = table(text=args.text)
    print(readme_table(rows) if args.readme else full_table(rows))


if __name__ == "__main__":
    main()
