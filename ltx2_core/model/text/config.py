"""Configuration of the text path after Gemma (spec §2): the feature extractor and the two embeddings connectors.

Read from the same `transformer` metadata section as the DiT (`connector_*`, `audio_connector_*`,
`caption_proj_before_connector` …). The Gemma feature width (hidden size × hidden states) is not in the metadata:
it is the input width of the checkpoint's `text_embedding_projection`, checked against the Gemma file when both
are known.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ltx2_core.model.transformer.config import ROPE_TYPES, TransformerConfig, parse_model_version
from ltx2_core.errors import ConfigError
from ltx2_core.releases import ModelVersion


class FeatureExtractorKind(str, enum.Enum):
    """How Gemma's hidden states become text features (spec §2)."""

    MEAN_RANGE = "v1"  # LTX-2.0: per-sample, per-layer mean/range over valid tokens; one projection for both streams
    PER_TOKEN_RMS = "v2"  # LTX-2.3: per-token RMS per layer; separate video and audio projections with bias


# the 2.3 keys and the only values the released checkpoints (and the reference) support
_V2_KEYS = {
    "caption_proj_before_connector": True,
    "caption_projection_first_linear": False,
    "caption_projection_second_linear": False,
    "caption_proj_input_norm": False,
}


@dataclass(frozen=True)
class ConnectorConfig:
    """One Embeddings1DConnector: `num_layers` blocks of width heads·head_dim over the padded prompt tokens."""

    heads: int
    head_dim: int
    num_layers: int
    num_registers: int  # learnable registers that replace the padding; the token count must be a multiple
    gated_attention: bool
    max_pos: tuple[float, ...] = (1,)  # RoPE max position of the token-index axis (released: 4096)
    rope_theta: float = 10000.0
    rope_type: str = "split"
    rope_float64: bool = True
    ff_bias: bool = True  # the feed-forward's linears have biases (`connector_ff_bias`, ltx-core 1.2.0)

    @property
    def width(self) -> int:
        return self.heads * self.head_dim


@dataclass(frozen=True)
class TextConfig:
    """Feature extractor + video and audio connectors of one checkpoint."""

    kind: FeatureExtractorKind
    video: ConnectorConfig
    audio: ConnectorConfig

    @classmethod
    def from_metadata(cls, section: Mapping[str, Any], model_version: str | None = None) -> TextConfig:
        """Builds the text path from the `transformer` section (and the file's `model_version`); every unsupported
        value is reported in one error."""
        problems = _check_section(section)
        if problems:
            raise ConfigError("unsupported text connector config: " + "; ".join(problems))
        get = section.get
        # the reference's default when the key is missing: 1.0.0 (LTX-2.0/2.3) interleaved, 1.2.0 (LTX-2.5) split
        v2_5 = parse_model_version(model_version, section) is ModelVersion.V2_5
        shared = dict(
            gated_attention=bool(get("connector_apply_gated_attention", False)),
            max_pos=tuple(get("connector_positional_embedding_max_pos", [1])),
            rope_type=get("rope_type", "split" if v2_5 else "interleaved"),
            rope_float64=get("frequencies_precision", "float32") == "float64",
            num_registers=get("connector_num_learnable_registers", 128),
            ff_bias=bool(get("connector_ff_bias", True)),
        )
        video = ConnectorConfig(
            heads=get("connector_num_attention_heads", 30),
            head_dim=get("connector_attention_head_dim", 128),
            num_layers=get("connector_num_layers", 2),
            **shared,
        )
        audio = ConnectorConfig(
            heads=get("audio_connector_num_attention_heads", video.heads),
            head_dim=get("audio_connector_attention_head_dim", video.head_dim),
            num_layers=get("audio_connector_num_layers", video.num_layers),
            **shared,
        )
        v2 = bool(_V2_KEYS.keys() & section.keys())
        kind = FeatureExtractorKind.PER_TOKEN_RMS if v2 else FeatureExtractorKind.MEAN_RANGE
        config = cls(kind, video, audio)
        config.validate()
        return config

    def validate(self) -> None:
        problems = []
        if self.kind is FeatureExtractorKind.MEAN_RANGE and self.video.width != self.audio.width:
            problems.append(
                f"the LTX-2.0 feature extractor feeds both connectors, so their widths must match "
                f"(video {self.video.width}, audio {self.audio.width})"
            )
        for side, connector in (("video", self.video), ("audio", self.audio)):
            if connector.head_dim % 2:
                problems.append(f"{side} connector head_dim={connector.head_dim} must be even (RoPE rotates pairs)")
        if problems:
            raise ConfigError("inconsistent text connector config: " + "; ".join(problems))

    def check_matches(self, transformer: TransformerConfig) -> None:
        """The connectors' outputs are the DiT's text contexts: widths must agree (ConfigError otherwise)."""
        if transformer.caption_channels is not None:
            expected = {"video": transformer.caption_channels, "audio": transformer.caption_channels}
            what = "caption_channels"
        else:
            expected = {"video": transformer.video.context_dim, "audio": transformer.audio.context_dim}
            what = "cross_attention_dim"
        found = {"video": self.video.width, "audio": self.audio.width}
        wrong = [f"{side} connector width {found[side]} != transformer {what} {expected[side]}"
                 for side in ("video", "audio") if found[side] != expected[side]]
        if wrong:
            raise ConfigError("text connectors do not fit the transformer: " + "; ".join(wrong))

    def to_metadata(self) -> dict[str, Any]:
        """The connector keys of the `transformer` section (merge into `TransformerConfig.to_metadata()`)."""
        v, a = self.video, self.audio
        section: dict[str, Any] = {
            "connector_num_attention_heads": v.heads,
            "connector_attention_head_dim": v.head_dim,
            "connector_num_layers": v.num_layers,
            "connector_num_learnable_registers": v.num_registers,
            "connector_positional_embedding_max_pos": list(v.max_pos),
            "connector_apply_gated_attention": v.gated_attention,
            "connector_norm_output": True,
        }
        if not v.ff_bias:  # 1.2.0's key; absent means biases, as every file before it
            section["connector_ff_bias"] = False
        if (a.heads, a.head_dim, a.num_layers) != (v.heads, v.head_dim, v.num_layers):
            section.update(
                audio_connector_num_attention_heads=a.heads,
                audio_connector_attention_head_dim=a.head_dim,
                audio_connector_num_layers=a.num_layers,
            )
        if self.kind is FeatureExtractorKind.PER_TOKEN_RMS:
            section.update(_V2_KEYS, text_encoder_norm_type="per_token_rms")
        return section

    @classmethod
    def tiny(cls, transformer: TransformerConfig) -> TextConfig:
        """Small connectors (2 blocks, 4 registers) that fit `TransformerConfig.tiny` of the same version."""
        def connector(width: int) -> ConnectorConfig:
            return ConnectorConfig(heads=2, head_dim=width // 2, num_layers=2, num_registers=4,
                                   gated_attention=transformer.gated_attention, max_pos=(4096,),
                                   rope_type=transformer.rope_type, rope_float64=transformer.rope_float64)

        if transformer.caption_channels is not None:
            return cls(FeatureExtractorKind.MEAN_RANGE, connector(transformer.caption_channels),
                       connector(transformer.caption_channels))
        return cls(FeatureExtractorKind.PER_TOKEN_RMS, connector(transformer.video.context_dim),
                   connector(transformer.audio.context_dim))


_CONNECTOR_INTS = (
    "connector_num_attention_heads", "connector_attention_head_dim", "connector_num_layers",
    "connector_num_learnable_registers", "audio_connector_num_attention_heads", "audio_connector_attention_head_dim",
    "audio_connector_num_layers",
)


def _check_section(section: Mapping[str, Any]) -> list[str]:
    problems = []
    for key in _CONNECTOR_INTS:
        value = section.get(key)
        if key in section and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            problems.append(f"{key}={value!r} (must be a positive integer)")
    max_pos = section.get("connector_positional_embedding_max_pos", [1])
    if not (isinstance(max_pos, list) and len(max_pos) == 1 and isinstance(max_pos[0], (int, float))
            and max_pos[0] > 0):
        problems.append(f"connector_positional_embedding_max_pos={max_pos!r} (must be one positive number)")
    if section.get("rope_type", "interleaved") not in ROPE_TYPES:
        problems.append(f"rope_type={section['rope_type']!r} (supported: {', '.join(ROPE_TYPES)})")
    if section.get("connector_norm_output", True) is not True:
        problems.append(f"connector_norm_output={section['connector_norm_output']!r} (supported: True)")
    present = _V2_KEYS.keys() & section.keys()
    if present:
        for key in sorted(_V2_KEYS.keys() - present):
            problems.append(f"{key} is missing (the LTX-2.3 text keys come together)")
        for key in sorted(present):
            if section[key] != _V2_KEYS[key]:
                problems.append(f"{key}={section[key]!r} (supported: {_V2_KEYS[key]!r})")
    norm_type = section.get("text_encoder_norm_type")
    if norm_type is not None and norm_type != ("per_token_rms" if present else None):
        problems.append(f"text_encoder_norm_type={norm_type!r} (supported: 'per_token_rms' with the LTX-2.3 keys)")
    return problems
