"""The text path's config from its tensors' shapes, for files without our `config` metadata (GGUF conversions,
ComfyUI's `ltx-2*-embeddings_connector*.safetensors`), as `gguf_file` sizes a GGUF transformer.

Each connector: its width and registers from `learnable_registers` (registers × width), its layers from the block
numbers, gated attention and feed-forward biases from the key set, its heads from the gate logits' rows (2.3, 2.5);
an ungated connector (2.0) has no tensor that tells its heads: the released head width (128: 30 heads of 3840) is
taken where the width is a multiple of it, else the DiT's video heads (the tiny test models). The feature extractor's
kind from its keys (2.3 / 2.5: one aggregate embedding per stream). RoPE (type, float64) as the DiT's, the maximum
position the released one (4096), as `TextConfig.from_metadata` reads them from the one `transformer` section.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ltx2_core.errors import ConfigError
from ltx2_core.model.text.config import ConnectorConfig, FeatureExtractorKind, TextConfig
from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.releases import RELEASED_CONNECTOR_HEAD_DIM, RELEASED_CONNECTOR_MAX_POS

FIX = ("give a text projection file with the 'config' metadata (the official checkpoint) or the connectors of this "
       "model")


def text_config_from_shapes(shapes: Mapping[str, tuple[int, ...]], dit: TransformerConfig,
                            path: str | os.PathLike) -> TextConfig:
    """`shapes`: model key (`TextProjection`'s names: `feature_extractor.*`, `video_connector.*`,
    `audio_connector.*`) -> shape; `path`: the connectors' file, for messages. ConfigError when a connector is
    missing or its shapes do not make one."""
    kind = (FeatureExtractorKind.PER_TOKEN_RMS if "feature_extractor.video_aggregate_embed.weight" in shapes
            else FeatureExtractorKind.MEAN_RANGE)
    config = TextConfig(kind, _connector(shapes, "video_connector.", dit, path),
                        _connector(shapes, "audio_connector.", dit, path))
    try:
        config.validate()
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}; {FIX}") from exc
    return config


def _connector(shapes: Mapping[str, tuple[int, ...]], prefix: str, dit: TransformerConfig,
               path: str | os.PathLike) -> ConnectorConfig:
    registers = shapes.get(prefix + "learnable_registers")
    if registers is None or len(registers) != 2:
        raise ConfigError(f"{path}: no {prefix[:-1].replace('_', ' ')} (learnable_registers) to size it by; {FIX}")
    count, width = registers
    blocks = {int(key[len(prefix):].split(".")[1]) for key in shapes
              if key.startswith(prefix + "transformer_1d_blocks.")}
    block = f"{prefix}transformer_1d_blocks.0."
    gate = shapes.get(block + "attn1.to_gate_logits.weight")
    if gate is not None:
        heads = gate[0]
    elif width % RELEASED_CONNECTOR_HEAD_DIM == 0:
        heads = width // RELEASED_CONNECTOR_HEAD_DIM
    else:
        heads = dit.video.heads
    if not blocks or width % heads:
        raise ConfigError(f"{path}: the {prefix[:-1].replace('_', ' ')} of width {width} has "
                          f"{len(blocks)} blocks and {heads} heads, which make no connector; {FIX}")
    return ConnectorConfig(heads=heads, head_dim=width // heads, num_layers=len(blocks), num_registers=count,
                           gated_attention=gate is not None, max_pos=(RELEASED_CONNECTOR_MAX_POS,),
                           rope_type=dit.rope_type, rope_float64=dit.rope_float64,
                           ff_bias=block + "ff.net.0.proj.bias" in shapes)
