"""The memory plan's figures against fake-tensor accounting at full size (issue 16): for the released LTX-2.0 and
2.3 transformers at 768×512×121 with the four guidance passes in one forward, bf16; and the plan with every module
of the run (issue 21) on 16, 24 and 32 GB cards with 64 GB of RAM, and the README's example line.

For each weight mode (bf16, fp8 block linears) the full 48-block model is built under `FakeTensorMode` (no memory,
no kernels) and one guided forward runs under `LiveTensorMemory`: the peak of simultaneously live tensor bytes
beyond the weights (the run's constants, RoPE and LTX-2.0's text K/V cache, included), which is what the device
must hold besides its weights. Next to it: `memory_plan.activation_bytes` + `text_kv_bytes` (the plan's estimate),
the weight bytes, and the plan for 24 and 32 GB cards (resident / streamed blocks, peak).

The modules beside the transformer are counted on meta models of the released sizes: Gemma 3 12B, the text
projection and connectors, the video VAE's decoder (the decoders' figure; the audio decoder and vocoder, which the
command line adds from the checkpoint, are not built here) and encoder; one-stage runs without an image.

    python bench/memory_plan.py [--frames 121 --height 512 --width 768 --passes 4] [--line]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

from bench.memory import LiveTensorMemory  # noqa: E402
from ltx2_core.model.transformer.config import TransformerConfig  # noqa: E402
from ltx2_core.demo import demo_inputs  # noqa: E402
from ltx2_core.geometry import audio_latent_length, audio_positions, video_positions  # noqa: E402
from ltx2_core.memory.offload import projection_parts  # noqa: E402
from ltx2_core.memory.sizes import SideBytes, encode_activation_bytes, gemma_12b_bytes  # noqa: E402
from ltx2_core.memory.plan import (  # noqa: E402
    GB,
    TILE_BYTES_512,
    MemoryPlan,
    MemoryPlanError,
    activation_bytes,
    plan_memory,
    text_kv_bytes,
    transformer_weight_bytes,
)
from ltx2_core.model.text.gemma3 import GEMMA3_12B_TEXT  # noqa: E402
from ltx2_core.model.text.projection import TextProjection  # noqa: E402
from ltx2_core.model.video_vae.config import VideoVaeConfig  # noqa: E402
from ltx2_core.model.video_vae.decoder import VideoDecoder  # noqa: E402
from ltx2_core.model.text.config import TextConfig  # noqa: E402
from ltx2_core.quant.policy import quantize_blocks  # noqa: E402
from ltx2_core.model.transformer import LTX2Transformer  # noqa: E402
from support.configs import RELEASED_2_0, RELEASED_2_3, RELEASED_VAE_2_0, RELEASED_VAE_2_3  # noqa: E402

RELEASED = {"2.0": (RELEASED_2_0, "2.0.0"), "2.3": (RELEASED_2_3, "2.3.0")}
RELEASED_VAES = {"2.0": RELEASED_VAE_2_0, "2.3": RELEASED_VAE_2_3}
# the README's example: LTX-2.3 from its fp8 file, 768x512x121 one-stage, a 24 GB card, 64 GB of RAM available
EXAMPLE = dict(version="2.3", fp8=True, card_gb=24, ram_gb=64)


def _meta_bytes(module) -> int:
    return sum(t.numel() * 2 for t in module.parameters())  # bf16


def released_side(version: str) -> tuple[int, SideBytes]:
    """(decoders, the text side) of a release in bf16, counted on meta models."""
    metadata, _ = RELEASED[version]
    with torch.device("meta"):
        projection = TextProjection(TextConfig.from_metadata(metadata), GEMMA3_12B_TEXT["hidden_size"],
                                    GEMMA3_12B_TEXT["num_hidden_layers"] + 1)
        decoder = VideoDecoder(VideoVaeConfig.from_metadata(RELEASED_VAES[version]))
    rest, layer, layers = gemma_12b_bytes(torch.bfloat16)
    encoding = encode_activation_bytes(GEMMA3_12B_TEXT["hidden_size"], GEMMA3_12B_TEXT["num_hidden_layers"],
                                       torch.bfloat16)
    part = max(_meta_bytes(module) for module in projection_parts(projection))
    return _meta_bytes(decoder), SideBytes(rest, layer, layers, _meta_bytes(projection),
                                           encode_activations=encoding, projection_part=part)


def released_plan(version: str, fp8: bool, card_gb: int, ram_gb: int, frames=121, height=512, width=768,
                  passes=4) -> MemoryPlan:
    """The plan the command line makes for a release's files (one-stage, no image) on a card and RAM."""
    config = TransformerConfig.from_metadata(*RELEASED[version])
    decoders, side = released_side(version)
    return plan_memory(config, transformer_weight_bytes(config, fp8=fp8), card_gb * 10**9, frames, height, width,
                       passes, fp8_available=not fp8, decoders=decoders, tile_bytes_512=TILE_BYTES_512, side=side,
                       ram=ram_gb * 10**9, mappable=True, source="free on cuda:0")


def _cell(plan: MemoryPlan) -> str:
    held = "pinned" if plan.pin else "mapped"
    return (f"{plan.resident_blocks}/48 resident, peak {plan.peak / GB:.1f} GB; host {plan.host_streamed / GB:.1f} "
            f"GB {held} + {plan.side.visitors / GB:.1f} GB")


def whole_run_table(args) -> None:
    print("| model | weights | 16 GB | 24 GB | 32 GB |")
    print("|---|---|---|---|---|")
    for version in RELEASED:
        for fp8 in (False, True):
            cells = []
            for gb in (16, 24, 32):
                try:
                    cells.append(_cell(released_plan(version, fp8, gb, 64, args.frames, args.height, args.width,
                                                     args.passes)))
                except MemoryPlanError as exc:
                    cells.append("refused: " + str(exc).split("; ")[-1])
            print(f"| LTX-{version} | {'fp8' if fp8 else 'bf16'} | {' | '.join(cells)} |")


def example_line() -> str:
    return released_plan(**EXAMPLE).describe()


def measured_activations(config: TransformerConfig, fp8: bool, args) -> int:
    """Peak live bytes of prepare_run + one forward of `args.passes` samples, fake tensors, bf16."""
    with FakeTensorMode(allow_non_fake_inputs=True):
        torch.set_default_dtype(torch.bfloat16)
        model = LTX2Transformer(config)
        torch.set_default_dtype(torch.float32)
        if fp8:
            quantize_blocks(model)
        with torch.no_grad():
            video, audio, _ = demo_inputs(model, pixel_frames=args.frames, height=args.height, width=args.width,
                                          text_tokens=8)
            video, audio = (type(s)(*(t.expand(args.passes, *t.shape[1:]) for t in s)) for s in (video, audio))
            caption = config.caption_channels
            contexts = [torch.randn(args.passes, 1024, caption or stream.context_dim, dtype=torch.bfloat16)
                        for stream in (config.video, config.audio)]
            memory = LiveTensorMemory()
            memory.ignore([*model.parameters(), *model.buffers()])
            with memory:
                run = model.prepare_run(*_positions(model, args), *contexts)
                model(video, audio, run)
    return memory.peak


def _positions(model, args):
    frames, rows, cols = (args.frames - 1) // 8 + 1, args.height // 32, args.width // 32
    return video_positions(frames, rows, cols, 24.0), audio_positions(audio_latent_length(args.frames, 24.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=121)
    parser.add_argument("--height", type=int, default=512)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--line", action="store_true", help="only the README's example line")
    args = parser.parse_args()
    if args.line:
        print(example_line())
        return
    print(f"{args.width}x{args.height}x{args.frames}, {args.passes} passes per forward, bf16\n")
    print("| model | weights | weight bytes | activations measured (fake) | estimated | 24 GB plan | 32 GB plan |")
    print("|---|---|---|---|---|---|---|")
    for version, (metadata, release) in RELEASED.items():
        config = TransformerConfig.from_metadata(metadata, release)
        for fp8 in (False, True):
            weights = transformer_weight_bytes(config, fp8=fp8)
            measured = measured_activations(config, fp8, args)
            estimate = activation_bytes(config, args.frames, args.height, args.width, args.passes) + text_kv_bytes(
                config, args.passes)
            plans = []
            for gb in (24, 32):
                try:
                    plan = plan_memory(config, weights, gb * 10**9, args.frames, args.height, args.width,
                                       args.passes, fp8_available=not fp8)
                    plans.append(f"{plan.resident_blocks}/48 resident, peak {plan.peak / GB:.1f} GB"
                                 + ("" if plan.cache_text_kv or not text_kv_bytes(config, 1) else ", no K/V cache"))
                except MemoryPlanError as exc:
                    plans.append(f"refused: {exc}")
            print(f"| LTX-{version} | {'fp8' if fp8 else 'bf16'} | {weights.total / GB:.1f} GB "
                  f"({weights.per_block / GB:.2f} per block) | {measured / GB:.2f} GB | {estimate / GB:.2f} GB | "
                  f"{plans[0]} | {plans[1]} |")
    print("\nEvery module of a one-stage run (the text side visiting while it encodes), 64 GB of RAM:\n")
    whole_run_table(args)


if __name__ == "__main__":
    main()
