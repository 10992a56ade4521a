"""`--memory stream` on the command line (the loader node has it), and docs/memory.md's plan line is what the program
prints."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from safetensors.torch import load_file

from ltx2_core.__main__ import main

ROOT = Path(__file__).resolve().parents[2]


def test_memory_stream_streams_every_block_with_the_output_of_the_resident_run(tmp_path, capsys):
    """Two-stage with an image on the demo (the video encoder and the upsampler visit their stage's device): every
    block streams, and the frames equal the resident run's."""
    Image.fromarray((np.arange(64 * 64 * 3) % 251).astype(np.uint8).reshape(64, 64, 3)).save(tmp_path / "first.png")
    common = ["generate", "--prompt", "a red car", "--mode", "two-stage", "--width", "128", "--height", "128",
              "--frames", "9", "--steps", "2", "--image", str(tmp_path / "first.png"), "--no-progress"]
    runs = {}
    for name in ("stream", "resident"):
        assert main([*common, "--memory", name, "--output", str(tmp_path / f"{name}.mp4"),
                     "--tensors", str(tmp_path / f"{name}.safetensors")]) == 0, capsys.readouterr().err
        runs[name] = load_file(str(tmp_path / f"{name}.safetensors"))
    assert "memory plan: 0/3 blocks resident" in capsys.readouterr().out
    torch.testing.assert_close(runs["stream"]["frames"], runs["resident"]["frames"], atol=1e-5, rtol=0)


def test_the_docs_example_line_is_what_the_program_prints():
    sys.path.insert(0, str(ROOT))
    from bench.memory_plan import example_line

    page = (ROOT / "docs" / "memory.md").read_text()
    found = re.search(r"`(memory plan: [^`]*)`", page)
    assert found, "docs/memory.md shows no plan line"
    assert " ".join(found.group(1).split()) == example_line()  # the page wraps it
