"""A tiny LTX-2.5 transformer file in the layout Lightricks ship it, `diffusion_models/ltx-2.5-22b-{dev,distilled}-
transformer-bf16.safetensors`: the DiT and the text connectors under `model.diffusion_model.` and nothing else (the
VAEs, the text encoder with its projection, the upsampler are files of their own), with the metadata ltx-core 1.2.0
reads from it: `config` holding only the `transformer` section, `model_version`, and `gemma_source_checkpoint` (a JSON
object naming the Gemma the text encoder file must be, by its `gemma_version`).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from ltx2_core.model.text.config import TextConfig
from ltx2_core.model.transformer.config import ModelVersion, TransformerConfig
from support.checkpoints import connector_tensors
from support.configs import GEMMA_SOURCE_2_5

MODEL_VERSION_2_5 = "2.5.0"
FILE_NAME = "ltx-2.5-22b-dev-transformer-bf16.safetensors"
PREFIX = "model.diffusion_model."


def transformer25_metadata(config: TransformerConfig, model_version: str | None = MODEL_VERSION_2_5
                           ) -> dict[str, str]:
    """The header metadata of a 2.5 transformer file for `config` (its connector keys from the tiny text config)."""
    section = config.to_metadata() | TextConfig.tiny(config).to_metadata()
    metadata = {"config": json.dumps({"transformer": section}), "gemma_source_checkpoint": json.dumps(GEMMA_SOURCE_2_5)}
    if model_version is not None:
        metadata["model_version"] = model_version
    return metadata


def write_transformer25(path: Path, state: dict[str, torch.Tensor], config: TransformerConfig, *,
                        connectors: bool = True, metadata: dict[str, str] | None = None) -> Path:
    """Writes `state` (our model's state dict) as a 2.5 transformer file; `connectors`: with the tiny text connectors
    beside the DiT, as the released file holds them."""
    tensors = {PREFIX + key: value.contiguous() for key, value in state.items()}
    if connectors:
        tensors |= connector_tensors(ModelVersion.V2_5)
    save_file(tensors, str(path), metadata=transformer25_metadata(config) if metadata is None else metadata)
    return path
