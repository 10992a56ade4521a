"""The CLI under torchrun (2 ranks, gloo, the demo model) decodes the video's tiles on both ranks: a clip long enough
for two temporal tiles is written as one process writes it (within 1e-4, as tests/distributed/test_torchrun.py),
rank 0 alone writes, and it says the decode was spread (one tile on each rank)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]
# 73 frames: 10 latent frames, two 64-frame chunks of the default tiling
GENERATE = ["-m", "ltx2_core", "generate", "--steps", "2", "--no-progress", "--frames", "73"]
TORCHRUN = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def _generate(tmp_path: Path, name: str, *flags: str) -> tuple[dict[str, torch.Tensor], str]:
    tensors = str(tmp_path / f"{name}.safetensors")
    command = [sys.executable, *(TORCHRUN if flags else []), *GENERATE, *flags, "--output",
               str(tmp_path / f"{name}.mp4"), "--tensors", tensors]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert run.stdout.count("wrote ") == 1  # rank 0 alone writes
    return load_file(tensors), run.stdout


def test_both_ranks_decode_tiles_of_what_one_process_writes(tmp_path):
    single, _ = _generate(tmp_path, "single")
    spread, said = _generate(tmp_path, "spread", "--cfg-parallel", "2")
    assert "video decoded in 2 tiles over 2 ranks (1 here)" in said, said
    for name in ("frames", "waveform"):
        torch.testing.assert_close(spread[name], single[name], atol=1e-4, rtol=0)
