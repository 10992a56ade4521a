"""Command line: `python -m ltx2_core` runs the main job.

Without --checkpoint it builds the tiny random-weight demo model (Gemma 3 text encoder, text connectors and DiT);
with one it loads the DiT from the official single-file checkpoint, and with --text-encoder also Gemma 3 (ComfyUI's
gemma_3_12B_it*.safetensors or a Hugging Face folder) and the checkpoint's text connectors. The positive and
negative prompts are encoded in one batched Gemma pass, then one batched DiT forward (conditional + unconditional)
runs on random latents; the shapes and timings are printed.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from ltx2_core.config import ModelVersion, TransformerConfig
from ltx2_core.demo import demo_inputs, demo_prompt_encoder, demo_transformer
from ltx2_core.errors import LTX2Error
from ltx2_core.loader import load_transformer
from ltx2_core.loader.text_weights import load_prompt_encoder
from ltx2_core.types import TextEmbeddings

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ltx2_core", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", help="official LTX-2 / LTX-2.3 .safetensors file (default: tiny demo model)")
    p.add_argument("--text-encoder", help="Gemma 3 12B: ComfyUI's gemma_3_12B_it*.safetensors or a Hugging Face "
                   "folder (with --checkpoint; without it random text contexts are used)")
    p.add_argument("--prompt", default="A cat walks along the beach at sunset while waves roll in.")
    p.add_argument("--negative-prompt", default="blurry, low quality, distorted, watermark")
    p.add_argument("--version", choices=[v.value for v in ModelVersion], default="2.0",
                   help="structure of the tiny demo model")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", choices=sorted(DTYPES), default=None, help="default: float32 demo / file dtype")
    p.add_argument("--frames", type=int, default=17, help="pixel frames, 8k+1")
    p.add_argument("--height", type=int, default=64, help="pixels, multiple of 32")
    p.add_argument("--width", type=int, default=96, help="pixels, multiple of 32")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    dtype = DTYPES[args.dtype] if args.dtype else None
    try:
        if args.text_encoder and not args.checkpoint:
            raise ValueError("--text-encoder needs --checkpoint (its text connectors belong to the checkpoint)")
        if args.checkpoint:
            model = load_transformer(args.checkpoint, device=args.device, dtype=dtype)
            source = args.checkpoint
            encoder = None
            if args.text_encoder:
                encoder = load_prompt_encoder(args.text_encoder, args.checkpoint, device=args.device, dtype=dtype)
        else:
            config = TransformerConfig.tiny(args.version)
            model = demo_transformer(config).to(device=args.device, dtype=dtype)
            encoder = demo_prompt_encoder(config)
            source = f"tiny random-weight demo (LTX-{args.version} structure)"
        text = None
        if encoder is not None:
            start = time.perf_counter()
            positive, negative = encoder.encode(args.prompt, args.negative_prompt)
            encoder.release()
            text = TextEmbeddings(*(torch.cat(pair) for pair in zip(positive, negative)))
            print(f"prompts: positive + negative in one Gemma pass, {(time.perf_counter() - start) * 1000:.1f} ms "
                  f"-> video context {tuple(text.video.shape)}, audio context {tuple(text.audio.shape)}")
        video, audio, run = demo_inputs(model, pixel_frames=args.frames, height=args.height, width=args.width,
                                        text=text)
    except (LTX2Error, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cfg = model.config
    params = sum(p.numel() for p in model.parameters())
    print(f"model: {source}; {cfg.num_layers} blocks, video {cfg.video.heads}x{cfg.video.head_dim}, "
          f"audio {cfg.audio.heads}x{cfg.audio.head_dim}, {params:,} parameters")
    start = time.perf_counter()
    with torch.no_grad():
        velocity_video, velocity_audio = model(video, audio, run)
    seconds = time.perf_counter() - start
    print(f"video latent tokens {tuple(video.latent.shape)} -> velocity {tuple(velocity_video.shape)}")
    print(f"audio latent tokens {tuple(audio.latent.shape)} -> velocity {tuple(velocity_audio.shape)}")
    print(f"text context video {tuple(run.video_context.shape)}, audio {tuple(run.audio_context.shape)}")
    print(f"one batched forward ({video.latent.shape[0]} passes) in {seconds * 1000:.1f} ms on {args.device}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
