"""Command line: `python -m ltx2_core` runs the main job.

Without --checkpoint it builds the tiny random-weight demo model (Gemma 3 text encoder, text connectors and DiT);
with one it loads the DiT from the official single-file checkpoint, and with --text-encoder also Gemma 3 (ComfyUI's
gemma_3_12B_it*.safetensors or a Hugging Face folder) and the checkpoint's text connectors. The positive and
negative prompts are encoded in one batched Gemma pass, then one batched DiT forward (conditional + unconditional)
runs on random latents; the conditional pass's denoised estimate is decoded by the video VAE (tiled) and the
audio VAE + vocoder (the checkpoint's, or the demo's tiny random ones) and written to an mp4 with audio.
The full sampler comes with the pipelines; this run exercises every component once.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from ltx2_core.config import ModelVersion, TransformerConfig
from ltx2_core.demo import demo_inputs, demo_prompt_encoder, demo_transformer
from ltx2_core.demo_decoders import Decoders, demo_decoders
from ltx2_core.errors import LTX2Error
from ltx2_core.latents import check_video_size, unpatchify_audio, unpatchify_video
from ltx2_core.loader import load_audio_decoder, load_transformer, load_video_decoder, load_vocoder
from ltx2_core.loader.text_weights import load_prompt_encoder
from ltx2_core.media import video_to_frames, write_mp4
from ltx2_core.model.audio_vae import decode_audio
from ltx2_core.model.transformer import to_x0
from ltx2_core.model.video_vae.tiling import decode_video
from ltx2_core.types import StreamInput, TextEmbeddings

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
    p.add_argument("--fps", type=float, default=24.0)
    p.add_argument("--output", default="ltx2_output.mp4", help="mp4 file to write (H.264 + AAC stereo)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    dtype = DTYPES[args.dtype] if args.dtype else None
    try:
        check_video_size(args.frames, args.height, args.width)
        if not Path(args.output).resolve().parent.is_dir():
            raise ValueError(f"output folder {Path(args.output).parent} does not exist; create it or pick another "
                             "--output")
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
        decoders = _decoders(args, dtype)
        text = None
        if encoder is not None:
            start = time.perf_counter()
            positive, negative = encoder.encode(args.prompt, args.negative_prompt)
            encoder.release()
            text = TextEmbeddings(*(torch.cat(pair) for pair in zip(positive, negative)))
            print(f"prompts: positive + negative in one Gemma pass, {(time.perf_counter() - start) * 1000:.1f} ms "
                  f"-> video context {tuple(text.video.shape)}, audio context {tuple(text.audio.shape)}")
        video, audio, run = demo_inputs(model, pixel_frames=args.frames, height=args.height, width=args.width,
                                        fps=args.fps, text=text)
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
    start = time.perf_counter()
    path = _write_video(args, decoders, (video, velocity_video), (audio, velocity_audio))
    print(f"decoded and wrote {path} ({args.frames} frames at {args.fps:g} fps, {args.width}x{args.height}, "
          f"stereo audio) in {time.perf_counter() - start:.1f} s")
    return 0


def _decoders(args: argparse.Namespace, dtype: torch.dtype | None) -> Decoders:
    if not args.checkpoint:
        return Decoders(*(m.to(device=args.device, dtype=dtype) for m in demo_decoders(args.version)))
    load = dict(device=args.device, dtype=dtype)
    return Decoders(load_video_decoder(args.checkpoint, **load), load_audio_decoder(args.checkpoint, **load),
                    load_vocoder(args.checkpoint, device=args.device))  # fp32: the vocoder is small and precision-bound


def _write_video(args: argparse.Namespace, decoders: Decoders, video: tuple[StreamInput, torch.Tensor],
                 audio: tuple[StreamInput, torch.Tensor]) -> str:
    """Decodes the conditional pass's denoised latents and writes the mp4; returns its path."""
    (video_in, video_velocity), (audio_in, audio_velocity) = video, audio
    with torch.no_grad():
        video_x0 = to_x0(video_in.latent[:1], video_velocity[:1], video_in.timesteps[:1])
        latent = unpatchify_video(video_x0, (args.frames - 1) // 8 + 1, args.height // 32, args.width // 32)
        frames = video_to_frames(decode_video(latent, decoders.video, output_device="cpu"))[0]
        audio_x0 = to_x0(audio_in.latent[:1], audio_velocity[:1], audio_in.timesteps[:1])
        waveform, sample_rate = decode_audio(unpatchify_audio(audio_x0, 8), decoders.audio, decoders.vocoder)
    return str(write_mp4(args.output, frames, args.fps, waveform[0].clamp(-1, 1).cpu(), sample_rate))


if __name__ == "__main__":
    sys.exit(main())
