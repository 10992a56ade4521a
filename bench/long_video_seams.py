"""The seams of a long clip on the tiny demo model (what docs/video_in/long_video.md reports): a clip of several
windows with sound sampled by `ltx2_core.long_video`, decoded once; the frame-to-frame and audio continuity at the
joins against the same measures inside the windows (tests/support/seams.py), beside two controls: the same windows
decoded one by one and concatenated (a decode seam), and windows sampled independently without holding the one
before (no continuation).

    python bench/long_video_seams.py [--version 2.0 --windows 3 --window 33 --overlap 16 --steps 3 --mode one-stage]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from ltx2_core.demo.models import demo_models  # noqa: E402
from ltx2_core.long_video import Sampled, join, plan_windows, sample_windows, window_request  # noqa: E402
from ltx2_core.pipeline import encode_request, sample_request  # noqa: E402
from ltx2_core.request import Request  # noqa: E402
from ltx2_core.stages import decode  # noqa: E402
from ltx2_core.windows import Windows  # noqa: E402
from support.seams import (  # noqa: E402
    audio_latent_seams,
    pixel_seams,
    sound_seams,
    video_latent_seams,
)

SIZE = 64


def long_request(windows: int, window: int, overlap: int, steps: int, mode: str = "one-stage") -> Request:
    """A demo request of `windows` windows at 24 fps."""
    spec = Windows(window, overlap)
    frames = window + (windows - 1) * spec.stride * 8
    size = 2 * SIZE if mode != "one-stage" else SIZE
    return Request("waves on a pebble beach", width=size, height=size, frames=frames, fps=24.0,
                   steps=None if mode == "distilled" else steps, mode=mode, windows=spec)


def per_window_decode(pieces, models):
    """The control: each window decoded on its own, its new frames and sound concatenated (a decode seam)."""
    frames, sounds, rate = [], [], None
    for window, latent in ((piece.window, piece.latent) for piece in pieces):
        out = decode(latent, models.decoders)
        start = 0 if window.index == 0 else 8 * (window.video_kept - 1) + 1
        frames.append(out.frames[start:])
        sample = 0 if window.index == 0 else (4 * window.audio_kept - 3) * out.sample_rate // 100
        sounds.append(out.waveform[:, sample:])
        rate = out.sample_rate
    return torch.cat(frames), torch.cat(sounds, dim=1), rate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", default="2.0")
    p.add_argument("--windows", type=int, default=3)
    p.add_argument("--window", type=int, default=33)
    p.add_argument("--overlap", type=int, default=16)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--mode", default="one-stage")
    args = p.parse_args()
    torch.set_grad_enabled(False)
    models = demo_models(args.version)
    request = long_request(args.windows, args.window, args.overlap, args.steps, args.mode)
    windows = plan_windows(request)
    print(f"demo {args.version}, {request.mode}, {request.width}x{request.height}, {request.frames} frames = "
          f"{len(windows)} windows of {args.window} sharing {args.overlap}")
    start = time.perf_counter()
    pieces = []
    latent, _ = sample_windows(request, models, pieces=pieces)
    out = decode(latent, models.decoders)
    print(f"sampled and decoded in {time.perf_counter() - start:.1f} s")
    rows = {"video latent |Δ|": video_latent_seams(latent.video, windows),
            "audio latent |Δ|": audio_latent_seams(latent.audio, windows),
            "pixel |Δ|": pixel_seams(out.frames, windows)}
    rows["sound sample |Δ|"], rows["sound 10 ms RMS jump"] = sound_seams(out.waveform, out.sample_rate, windows)
    frames, sound, rate = per_window_decode(pieces, models)
    control = {"pixel |Δ|": pixel_seams(frames, windows)}
    control["sound sample |Δ|"], control["sound 10 ms RMS jump"] = sound_seams(sound, rate, windows)
    prompts = encode_request(request, models.prompt_encoder, models.transformer.config)
    alone = join([Sampled(w, (sample_request(window_request(request, w), models, *prompts)[0],)) for w in windows])
    loose = {"video latent |Δ|": video_latent_seams(alone.video, windows),
             "audio latent |Δ|": audio_latent_seams(alone.audio, windows)}
    print("| measure | long video (joined, one decode) | control: per-window decode | control: no continuation |")
    print("|---|---|---|---|")
    for name, seams in rows.items():
        print(f"| {name} | {seams.line()} | {control[name].line() if name in control else '—'} | "
              f"{loose[name].line() if name in loose else '—'} |")


if __name__ == "__main__":
    main()
