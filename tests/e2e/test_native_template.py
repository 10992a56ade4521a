"""ComfyUI's own LTX-2.3 two-stage template with its two SamplerCustomAdvanced swapped for LTX-2 SamplerCustomAdvanced
(fast), everything else ComfyUI's own nodes (example_workflows/api/ltx23_native_template_fast.api.json), in a real
ComfyUI on the tiny files: ComfyUI's Load Checkpoint / audio VAE loader read the native-readable tiny bundle, its LoRA
loader the tiny LoRA, its latent upscale model loader the tiny x2 upsampler; it writes an mp4 with sound at twice the
first stage's size. Its text path runs as ComfyUI's own, on the tiny Gemma file through a
test-only shim (ComfyUI hard-codes Gemma 3 12B's sizes: tests/e2e/tiny_native_text)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import av

from ltx2_core.audio_io import read_audio

from .conftest import ROOT, TINY

WORKFLOW = ROOT / "example_workflows" / "api" / "ltx23_native_template_fast.api.json"
# the template's files -> the tiny ones; a 64 x 64 first stage (EmptyLTXVLatentVideo's least) of 9 frames
TINY_FILES = [f"ckpt_name={TINY['native_checkpoint']}", f"lora_name={TINY['lora']}", f"model_name={TINY['upsampler']}",
              "3059.width=64", "3059.height=64", "4988.value=9"]
SIZE = (9, 128, 128)  # frames, width, height of the video: the x2 upsampled second stage


def _run(server, workflow: Path, settings: list[str], out: Path) -> None:
    args = [sys.executable, str(ROOT / "tools" / "ltx2_client.py"), str(workflow), "--server", server.url, "--out",
            str(out), "--timeout", "600"]  # the template's seeds (RandomNoise 43 and 42)
    for setting in settings:
        args += ["--set", setting]
    run = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]


def _check_video(out: Path) -> None:
    (video_file,) = out.glob("*.mp4")
    with av.open(str(video_file)) as container:
        video = container.streams.video[0]
        assert (video.frames, video.width, video.height, video.average_rate) == (*SIZE, 24)
        assert len(container.streams.audio) == 1
    sound = read_audio(video_file)
    assert sound.samples.shape[0] == 2 and abs(sound.seconds - SIZE[0] / 24) < 0.1  # the decoded stereo


def test_the_template_with_our_sampler_writes_an_mp4_with_sound(comfyui, tmp_path):
    _run(comfyui, WORKFLOW, [*TINY_FILES, f"text_encoder={TINY['text_encoder']}"], tmp_path)
    _check_video(tmp_path)

