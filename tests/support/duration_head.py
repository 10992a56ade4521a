"""LTX-2.5's duration head written as 1.2.0 reads it (the released file is not public yet, so its layout is 1.2.0's
loader's): `duration_head.*` tensors with a `config` metadata entry holding the `transformer` section's context
widths and a `duration_head` section, in a file of its own (the split layout's `--duration-head-path`) or added to
a transformer file (the monolith's). Random weights scaled small, so that the prediction stays near `seconds`
(`mlp_out.bias` = log seconds) whatever the prompt: tests place it away from a frame-rounding edge."""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ltx2_core.model.duration_head import KEY_PREFIX, DurationHead, DurationHeadConfig
from ltx2_core.model.transformer.config import TransformerConfig

TINY_HEAD = {"pooler_hidden_dim": 32, "num_queries": 2, "num_pooler_heads": 4, "mlp_hidden": 32}
DEFAULT_SECONDS = 0.9  # 21.6 frames at 24 fps: 17 frames, 5 frames from an 8k+1 edge (16.5, 24.5)


def head_sections(config: TransformerConfig) -> dict:
    """The `config` sections the head is sized by: the transformer's context widths and the head's own."""
    return {"transformer": {"cross_attention_dim": config.video.context_dim,
                            "audio_cross_attention_dim": config.audio.context_dim},
            "duration_head": dict(TINY_HEAD)}


def duration_head_tensors(config: TransformerConfig, seconds: float = DEFAULT_SECONDS,
                          seed: int = 0) -> dict[str, torch.Tensor]:
    """The head's tensors under `duration_head.`, predicting about `seconds` for any contexts."""
    generator = torch.Generator().manual_seed(seed)
    with torch.device("meta"):
        head = DurationHead(DurationHeadConfig.from_metadata(head_sections(config)))
    tensors = {KEY_PREFIX + key: torch.randn(value.shape, generator=generator) * 0.02
               for key, value in head.state_dict().items()}
    tensors[KEY_PREFIX + "mlp_out.bias"] = torch.full((1,), math.log(seconds))
    return tensors


def write_duration_head(path: Path, config: TransformerConfig, seconds: float = DEFAULT_SECONDS, seed: int = 0,
                        model_version: str | None = "2.5.0") -> Path:
    """A duration head file of its own for the transformer of `config`."""
    metadata = {"config": json.dumps(head_sections(config))}
    if model_version is not None:
        metadata["model_version"] = model_version
    save_file(duration_head_tensors(config, seconds, seed), str(path), metadata=metadata)
    return path


def add_duration_head(path: Path, config: TransformerConfig, seconds: float = DEFAULT_SECONDS, seed: int = 0) -> Path:
    """The transformer file at `path` rewritten with the head's tensors beside its own and the head's section in its
    `config` (the monolith's layout)."""
    with safe_open(str(path), "pt") as file:
        tensors = {key: file.get_tensor(key) for key in file.keys()}
        metadata = dict(file.metadata() or {})
    sections = json.loads(metadata.get("config", "{}"))
    sections["duration_head"] = dict(TINY_HEAD)
    metadata["config"] = json.dumps(sections)
    save_file(tensors | duration_head_tensors(config, seconds, seed), str(path), metadata=metadata)
    return path
