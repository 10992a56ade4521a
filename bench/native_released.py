"""The GPU inputs of bench/native_swap.py when no released checkpoint is at hand (a lent GPU machine has none and
reaches no download): a native diffusion-model file of a release's transformer at its released widths, cut to
`layers` of its 48 blocks, with random weights made on the device; the released audio latent as
LTXVEmptyLatentAudio makes it; and EasyCache's own count of the steps it skipped, read from ComfyUI's log.

Both samplers load the same file through ComfyUI's Load Diffusion Model (UNETLoader), which counts the blocks from
the keys and takes the rest of the structure from the file's `transformer` metadata section, as for a released
file. The text connectors are left out (the bench feeds connector outputs), so ComfyUI reports them missing.
"""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path
from typing import Self

import torch
from safetensors.torch import save_file
from suite_models import RELEASED, random_transformer, suite_config

AUDIO_CHANNELS, AUDIO_BINS, AUDIO_LATENTS_PER_SECOND = 8, 16, 25  # the released audio VAE's latent (spec §4)


def write_released_transformer(folder: Path, version: str, layers: int, device: torch.device, seed: int = 0) -> Path:
    """`folder`/ltx-<version>-<layers>-blocks-random.safetensors: the transformer under its official keys
    (`model.diffusion_model.` prefix), bf16, with the released metadata section (`num_layers` = `layers`)."""
    section, model_version = RELEASED[version]
    model = random_transformer(suite_config(version, layers, quick=False), device, torch.bfloat16, seed)
    tensors = {"model.diffusion_model." + key: value.contiguous() for key, value in model.state_dict().items()}
    path = Path(folder) / f"ltx-{version}-{layers}-blocks-random.safetensors"
    metadata = {"config": json.dumps({"transformer": {**section, "num_layers": layers}}),
                "model_version": model_version}
    save_file(tensors, str(path), metadata=metadata)
    del model, tensors
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return path


def released_audio_latent(frames: int, fps: int, device: torch.device) -> dict:
    """LTXVEmptyLatentAudio's output for the released audio VAE: zeros (1, 8, ⌈frames / fps · 25⌉, 16)."""
    length = math.ceil(frames / fps * AUDIO_LATENTS_PER_SECOND)
    return {"samples": torch.zeros(1, AUDIO_CHANNELS, length, AUDIO_BINS, device=device), "type": "audio"}


class SkippedSteps(logging.Handler):
    """Collects EasyCache's closing line ("EasyCache - skipped N/M steps") of every native run while attached."""

    PATTERN = re.compile(r"EasyCache - skipped (\d+)/(\d+) steps")

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.runs: list[tuple[int, int]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if found := self.PATTERN.search(record.getMessage()):
            self.runs.append((int(found[1]), int(found[2])))

    def __enter__(self) -> Self:
        root = logging.getLogger()
        self.previous = root.level
        root.setLevel(min(root.level, logging.INFO) if root.level else logging.INFO)
        root.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        root = logging.getLogger()
        root.removeHandler(self)
        root.setLevel(self.previous)
