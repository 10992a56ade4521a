"""The memory plan's figures against fake-tensor accounting at full size (issue 16): for the released LTX-2.0, 2.3
and 2.5 transformers at 768×512×121 with the four guidance passes in one forward, bf16; and the plan with every
module of the run (issue 21) on 16, 24 and 32 GB cards with 64 GB of RAM, and the README's example line. LTX-2.5
twice: with its convolutional and with its diffusion video decoder, whose decoding memory is measured here too
(fake tensors, the released structure, per spatial tile size: `sizes.diffusion_decode_bytes`).

For each weight mode (bf16, fp8 block linears) the full 48-block model is built under `FakeTensorMode` (no memory,
no kernels) and one guided forward runs under `LiveTensorMemory`: the peak of simultaneously live tensor bytes
beyond the weights (the run's constants, RoPE and LTX-2.0's text K/V cache, included), which is what the device
must hold besides its weights. Next to it: `memory_plan.activation_bytes` + `text_kv_bytes` (the plan's estimate),
the weight bytes, and the plan for 24 and 32 GB cards (resident / streamed blocks, peak).

The modules beside the transformer are counted on meta models of the released sizes: Gemma 3 12B, the text
projection and connectors, the video VAE's decoder (the decoders' figure; the audio decoder and vocoder, which the
command line adds from the checkpoint, are not built here) and encoder; one-stage runs without an image. No LTX-2.5
header was at hand: its Gemma 4 12B text encoder is counted at Gemma 3 12B's sizes, its convolutional decoder at
2.3's, its diffusion decoder at ltx-core 1.2.0's defaults (the file's `vae.decoder` section may differ).

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
from ltx2_core.memory.sizes import (  # noqa: E402
    SideBytes,
    diffusion_decode_bytes,
    encode_activation_bytes,
    gemma_12b_bytes,
)
from ltx2_core.memory.plan import (  # noqa: E402
    GB,
    TILE_BYTES_512,
    TILE_SIZES,
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
from ltx2_core.model.video_vae.diffusion_config import DiffusionDecoderConfig  # noqa: E402
from ltx2_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder  # noqa: E402
from ltx2_core.model.video_vae.tiling import TilingConfig  # noqa: E402
from ltx2_core.model.text.config import TextConfig  # noqa: E402
from ltx2_core.quant.policy import quantize_blocks  # noqa: E402
from ltx2_core.model.transformer import LTX2Transformer  # noqa: E402
from support.configs import (  # noqa: E402
    RELEASED_2_0,
    RELEASED_2_3,
    RELEASED_2_5,
    RELEASED_VAE_2_0,
    RELEASED_VAE_2_3,
)

RELEASED = {"2.0": (RELEASED_2_0, "2.0.0"), "2.3": (RELEASED_2_3, "2.3.0"), "2.5": (RELEASED_2_5, "2.5.0")}
RELEASED_VAES = {"2.0": RELEASED_VAE_2_0, "2.3": RELEASED_VAE_2_3, "2.5": RELEASED_VAE_2_3}
# LTX-2.5's diffusion decoder at ltx-core 1.2.0's defaults (NADiffusionDecoder: stages 1024..128, stage 5 eight blocks)
RELEASED_DIFFUSION_VAE = {"_class_name": "CausalDiffusionVAE", "latent_channels": 128, "decoder": {}}
DECODERS = {"2.0": ("conv",), "2.3": ("conv",), "2.5": ("conv", "diffusion")}
# the README's example: LTX-2.3 from its fp8 file, 768x512x121 one-stage, a 24 GB card, 64 GB of RAM available
EXAMPLE = dict(version="2.3", fp8=True, card_gb=24, ram_gb=64)


def _meta_bytes(module) -> int:
    return sum(t.numel() * 2 for t in module.parameters())  # bf16


def released_side(version: str, decoder: str = "conv") -> tuple[int, SideBytes]:
    """(decoders, the text side) of a release in bf16, counted on meta models; `decoder`: LTX-2.5's "conv" or
    "diffusion" video decoder."""
    metadata, _ = RELEASED[version]
    with torch.device("meta"):
        projection = TextProjection(TextConfig.from_metadata(metadata), GEMMA3_12B_TEXT["hidden_size"],
                                    GEMMA3_12B_TEXT["num_hidden_layers"] + 1)
        decoder = (DiffusionVideoDecoder(DiffusionDecoderConfig.from_metadata(RELEASED_DIFFUSION_VAE))
                   if decoder == "diffusion" else VideoDecoder(VideoVaeConfig.from_metadata(RELEASED_VAES[version])))
    rest, layer, layers = gemma_12b_bytes(torch.bfloat16)
    encoding = encode_activation_bytes(GEMMA3_12B_TEXT["hidden_size"], GEMMA3_12B_TEXT["num_hidden_layers"],
                                       torch.bfloat16)
    part = max(_meta_bytes(module) for module in projection_parts(projection))
    return _meta_bytes(decoder), SideBytes(rest, layer, layers, _meta_bytes(projection),
                                           encode_activations=encoding, projection_part=part)


def released_plan(version: str, fp8: bool, card_gb: int, ram_gb: int, frames=121, height=512, width=768,
                  passes=4, decoder: str = "conv") -> MemoryPlan:
    """The plan the command line makes for a release's files (one-stage, no image) on a card and RAM; `decoder`:
    LTX-2.5's "conv" or "diffusion" video decoder (`ModelFiles.plan` tells them from the VAE file's header)."""
    config = TransformerConfig.from_metadata(*RELEASED[version])
    decoders, side = released_side(version, decoder)
    base, tile = diffusion_decode_bytes(frames, height, width) if decoder == "diffusion" else (0, TILE_BYTES_512)
    return plan_memory(config, transformer_weight_bytes(config, fp8=fp8), card_gb * 10**9, frames, height, width,
                       passes, fp8_available=not fp8, decoders=decoders, tile_bytes_512=tile, side=side,
                       ram=ram_gb * 10**9, mappable=True, source="free on cuda:0", decode_base=base)


def _cell(plan: MemoryPlan) -> str:
    held = "pinned" if plan.pin else "mapped"
    return (f"{plan.resident_blocks}/48 resident, peak {plan.peak / GB:.1f} GB, {plan.decode_tile} px tiles; host "
            f"{plan.host_streamed / GB:.1f} GB {held} + {plan.side.visitors / GB:.1f} GB")


def whole_run_table(args) -> None:
    print("| model | video decoder | weights | 16 GB | 24 GB | 32 GB |")
    print("|---|---|---|---|---|---|")
    for version in RELEASED:
        for decoder in DECODERS[version]:
            for fp8 in (False, True):
                cells = []
                for gb in (16, 24, 32):
                    try:
                        cells.append(_cell(released_plan(version, fp8, gb, 64, args.frames, args.height, args.width,
                                                         args.passes, decoder)))
                    except MemoryPlanError as exc:
                        cells.append("refused: " + str(exc).split("; ")[-1])
                name = "convolutional" if decoder == "conv" else "diffusion"
                print(f"| LTX-{version} | {name} | {'fp8' if fp8 else 'bf16'} | {' | '.join(cells)} |")


def diffusion_decode_table(args) -> None:
    """The diffusion decoder's decoding memory (fake tensors, bf16) per tile size next to the plan's figure."""
    config = DiffusionDecoderConfig.from_metadata(RELEASED_DIFFUSION_VAE)
    latent = ((args.frames - 1) // 8 + 1, args.height // 32, args.width // 32)
    base, at_512 = diffusion_decode_bytes(args.frames, args.height, args.width)
    print("| tile | measured (fake) | plan |")
    print("|---|---|---|")
    for tile in TILE_SIZES:
        with FakeTensorMode(allow_non_fake_inputs=True):
            torch.set_default_dtype(torch.bfloat16)
            decoder = DiffusionVideoDecoder(config)
            torch.set_default_dtype(torch.float32)
            memory = LiveTensorMemory()
            memory.ignore([*decoder.parameters(), *decoder.buffers()])
            with torch.no_grad(), memory:
                decoder(torch.randn(1, 128, *latent, dtype=torch.bfloat16), None,
                        tiling=TilingConfig(spatial_tile=tile, spatial_overlap=max(32, tile // 8 // 32 * 32)))
        print(f"| {tile} px | {memory.peak / GB:.2f} GB | {(base + at_512 * tile * tile // 512**2) / GB:.2f} GB |")


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
    print("\nLTX-2.5's diffusion decoder, decoding memory per spatial tile (every frame at once):\n")
    diffusion_decode_table(args)


if __name__ == "__main__":
    main()
