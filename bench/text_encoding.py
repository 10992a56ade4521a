"""Prompt encoding: ours vs the reference ltx_core text path, same Gemma, same weights, same tokens.

Ours: positive + negative as ONE Gemma forward with batch 2, then the chunked feature extractor and the vectorised
connectors on the batch. Reference (what ltx_pipelines runs): each prompt alone, a B=1 Gemma forward, then
`EmbeddingsProcessor.process_hidden_states` (stack + flatten of all hidden states, boolean-mask register
substitution). Each side runs in its own subprocess so its peak memory can be read: the resident-set high-water
mark is reset after loading (Linux `/proc/self/clear_refs`), so "peak extra" is what encoding adds on top of the
weights.

    python bench/text_encoding.py --version {2.0,2.3} [--width-divisor 8] [--layers 12] [--repeats 3]

Structure: Gemma 3 12B and the released connectors at 1/width-divisor width, `--layers` Gemma layers, 1024 tokens.
Needs the reference: pip install --no-deps ltx-core==1.0.0 (plus einops scipy transformers sentencepiece).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from bench.memory import peak_extra_mib, reset_peak  # noqa: E402
from ltx2_core.demo import demo_tokenizer, random_weights_  # noqa: E402
from ltx2_core.model.text import PromptEncoder, TextProjection  # noqa: E402
from ltx2_core.model.text import gemma3 as gemma_lm  # noqa: E402
from ltx2_core.model.text.config import ConnectorConfig, FeatureExtractorKind, TextConfig  # noqa: E402
from support.census import OpCensus  # noqa: E402
from support.reference import reference_text_processor  # noqa: E402

POSITIVE = ("A red car drives through a rainy city at night; neon lights reflect on the wet street while the camera "
            "tracks alongside. Rain hisses on the asphalt and a distant siren rises and fades.")
NEGATIVE = "blurry, low quality, distorted, watermark, static, jittery motion, bad anatomy, noise"


def structure(version: str, divisor: int, layers: int) -> tuple[dict, TextConfig]:
    gemma = {**gemma_lm.GEMMA3_12B_TEXT, "hidden_size": 3840 // divisor, "intermediate_size": 15360 // divisor,
             "head_dim": 256 // divisor, "query_pre_attn_scalar": 256 // divisor, "num_hidden_layers": layers,
             "vocab_size": 384}

    def connector(heads: int, head_dim: int, blocks: int, gated: bool) -> ConnectorConfig:
        return ConnectorConfig(heads, head_dim // divisor, blocks, 128, gated, (4096,))

    if version == "2.0":
        c = connector(30, 128, 2, False)
        return gemma, TextConfig(FeatureExtractorKind.MEAN_RANGE, c, c)
    return gemma, TextConfig(FeatureExtractorKind.PER_TOKEN_RMS, connector(32, 128, 8, True),
                             connector(32, 64, 8, True))


def build(args) -> tuple[PromptEncoder, torch.nn.Module]:
    gemma_values, text = structure(args.version, args.width_divisor, args.layers)
    model = gemma_lm.build_on_meta(gemma_lm.text_config(gemma_values))
    random_weights_(model, seed=0, std=0.02)
    gemma_lm.materialize_buffers(model, "cpu")
    states = gemma_values["num_hidden_layers"] + 1
    with torch.device("meta"):
        projection = TextProjection(text, gemma_values["hidden_size"], states)
    random_weights_(projection, seed=1, std=0.02)
    reference = reference_text_processor(text, gemma_values["hidden_size"], states)
    reference.load_state_dict(projection.state_dict())
    return PromptEncoder(demo_tokenizer(1024), model, projection.eval()), reference


def run_side(args) -> dict:
    """One side in this process: warm up, reset the RSS peak, then time `repeats` encodings."""
    torch.set_num_threads(args.threads)
    encoder, reference = build(args)

    def ours():
        return encoder.encode(POSITIVE, NEGATIVE)

    def theirs():
        out = []
        with torch.no_grad():
            for prompt in (POSITIVE, NEGATIVE):
                ids, mask = encoder.tokenizer([prompt])
                states = gemma_lm.hidden_states(encoder.gemma, ids, mask)
                out.append(reference.process_hidden_states(states, mask, padding_side="left"))
        return out

    fn = ours if args.side == "ours" else theirs
    result = fn()
    base = reset_peak()
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    peak = peak_extra_mib(base)
    with OpCensus() as census:
        fn()
    if args.side == "ours":
        video = torch.cat([result[0].video, result[1].video])
    else:
        video = torch.cat([r.video_encoding for r in result])
    torch.save(video, args.output)
    return {"ms": statistics.median(times), "peak_mib": peak, "ops": sum(census.counts.values()),
            "syncs": sum(census.syncs().values())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", default="2.0", choices=["2.0", "2.3"])
    p.add_argument("--width-divisor", type=int, default=8)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--side", choices=["ours", "reference"], help=argparse.SUPPRESS)
    p.add_argument("--output", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.side:
        print(json.dumps(run_side(args)))
        return
    results, outputs = {}, {}
    for side in ("ours", "reference"):
        output = Path(f"/tmp/bench_text_{side}.pt")
        cmd = [sys.executable, __file__, "--side", side, "--output", str(output)] + sys.argv[1:]
        results[side] = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        outputs[side] = torch.load(output, weights_only=True)
    ours, ref = results["ours"], results["reference"]
    diff = (outputs["ours"] - outputs["reference"]).abs().max().item()
    print(f"LTX-{args.version} text path, Gemma 1/{args.width_divisor} width x {args.layers} layers, 1024 tokens, "
          f"positive + negative")
    print(f"ours: {ours['ms']:.0f} ms, peak extra {ours['peak_mib']:.0f} MiB, {ours['ops']} ATen ops, "
          f"{ours['syncs']} host syncs")
    print(f"reference: {ref['ms']:.0f} ms, peak extra {ref['peak_mib']:.0f} MiB, {ref['ops']} ATen ops, "
          f"{ref['syncs']} host syncs")
    print(f"speed-up {ref['ms'] / ours['ms']:.2f}x, peak memory {ref['peak_mib'] / max(ours['peak_mib'], 1):.2f}x "
          f"less, ops {ref['ops'] / ours['ops']:.2f}x fewer; max abs diff of the video contexts {diff:.1e}")


if __name__ == "__main__":
    main()
