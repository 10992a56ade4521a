"""Model configuration, built once from the checkpoint's safetensors metadata and validated there.

The official single-file checkpoints carry a JSON `config` metadata entry whose `transformer` section describes the
AV DiT (spec §8). `TransformerConfig.from_metadata` turns that section into a frozen value; every unsupported value
is reported in one error that names the key, the value found and what is supported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ltx2_core.errors import ConfigError
from ltx2_core.releases import DEFAULT_VERSION, RELEASES, ModelVersion, parse_version


# config keys first written by LTX-2.5's files: without a `model_version`, any of them names the release
_KEYS_SINCE_2_5 = ("ff_bias", "audio_ff_bias", "use_prompt_adaln_single", "use_keyframes_abs_pos_embedding")


def parse_model_version(value: str | None, section: Mapping[str, Any]) -> ModelVersion:
    """Reads the `model_version` metadata string; without one, infers the generation from the config keys."""
    if value is None or value == "":
        if any(key in section for key in _KEYS_SINCE_2_5):
            return ModelVersion.V2_5
        return ModelVersion.V2_3 if section.get("cross_attention_adaln", False) else ModelVersion.V2_0
    return parse_version(value)


# Values the released LTX-2 transformers use and this implementation assumes (the reference checks the same set).
FIXED_VALUES: dict[str, Any] = {
    "dropout": 0.0,
    "attention_bias": True,
    "num_vector_embeds": None,
    "activation_fn": "gelu-approximate",
    "num_embeds_ada_norm": 1000,
    "use_linear_projection": False,
    "only_cross_attention": False,
    "cross_attention_norm": True,
    "double_self_attention": False,
    "upcast_attention": False,
    "standardization_norm": "rms_norm",
    "norm_elementwise_affine": False,
    "qk_norm": "rms_norm",
    "positional_embedding_type": "rope",
    "use_audio_video_cross_attention": True,
    "share_ff": False,
    "av_cross_ada_norm": True,
    "use_middle_indices_grid": True,
}

ROPE_TYPES = ("split", "interleaved")
FREQUENCY_PRECISIONS = ("float32", "float64")


@dataclass(frozen=True)
class StreamConfig:
    """One modality stream of the AV transformer (video or audio)."""

    heads: int
    head_dim: int
    context_dim: int  # width of the text context the stream cross-attends to
    in_channels: int  # latent features per token
    out_channels: int
    max_pos: tuple[float, ...]  # RoPE max position per axis (video: seconds, px, px; audio: seconds)

    @property
    def width(self) -> int:
        return self.heads * self.head_dim

    @classmethod
    def from_metadata(cls, section: Mapping[str, Any], prefix: str, defaults: StreamConfig) -> StreamConfig:
        """Reads `<prefix>num_attention_heads` etc.; the audio keys are the video keys with an `audio_` prefix."""
        get = section.get
        return cls(
            heads=get(prefix + "num_attention_heads", defaults.heads),
            head_dim=get(prefix + "attention_head_dim", defaults.head_dim),
            context_dim=get(prefix + "cross_attention_dim", defaults.context_dim),
            in_channels=get(prefix + "in_channels", defaults.in_channels),
            out_channels=get(prefix + "out_channels", defaults.out_channels),
            max_pos=tuple(get(prefix + "positional_embedding_max_pos", defaults.max_pos)),
        )


# the released sizes, used for keys a metadata section leaves out
VIDEO_DEFAULTS = StreamConfig(heads=32, head_dim=128, context_dim=4096, in_channels=128, out_channels=128,
                              max_pos=(20, 2048, 2048))
AUDIO_DEFAULTS = StreamConfig(heads=32, head_dim=64, context_dim=2048, in_channels=128, out_channels=128, max_pos=(20,))


@dataclass(frozen=True)
class TransformerConfig:
    """The AV DiT of every release. Built with `from_metadata` or `tiny`."""

    version: ModelVersion
    video: StreamConfig
    audio: StreamConfig
    num_layers: int
    caption_channels: int | None  # Gemma feature width fed to the in-DiT caption projection; None = no projection
    gated_attention: bool  # 2.3: per-head 2·sigmoid gates on every attention
    cross_attention_adaln: bool  # 2.3: text cross-attention modulated by AdaLN (9-row tables, prompt tables)
    ff_bias: bool = True  # the video feed-forward's linears have biases (2.5: none)
    audio_ff_bias: bool = True
    # with cross_attention_adaln: the text K/V modulation also follows sigma (2.3's prompt AdaLN); off (2.5), only
    # the blocks' static prompt tables modulate it, so the text K/V are the same at every step
    prompt_adaln: bool = True
    keyframe_embedding: bool = False  # a learned vector added to the tokens of the first latent frame
    # the audio<->video cross-attention's scale/shift from the stream's own timesteps (ltx-core 1.2.0, the 2.5
    # reference) instead of the other stream's sigma (1.0.0): a fact of the release, not of the metadata
    own_timestep_cross_modulation: bool = False
    norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_type: str = "split"
    rope_float64: bool = True  # frequency grid computed in float64 (released configs)
    timestep_scale_multiplier: float = 1000.0
    av_ca_timestep_scale_multiplier: float = 1000.0

    @property
    def adaln_rows(self) -> int:
        """Rows of each block's scale_shift_table: shift/scale/gate for attention and FFN (+3 for text cross-attn)."""
        return 9 if self.cross_attention_adaln else 6

    @property
    def static_text_kv(self) -> bool:
        """Whether the text cross-attention's keys and values are the same at every step (computable once per
        prompt): always without the cross-attention AdaLN (2.0), and with it when the prompt AdaLN is off (2.5)."""
        return not (self.cross_attention_adaln and self.prompt_adaln)

    @property
    def cross_pe_max_pos(self) -> float:
        """Audio-video cross-attention RoPE uses the time axis with the larger of both max positions."""
        return max(self.video.max_pos[0], self.audio.max_pos[0])

    @property
    def cross_pe_dim(self) -> int:
        return self.audio.width

    @classmethod
    def from_metadata(cls, section: Mapping[str, Any], model_version: str | None = None) -> TransformerConfig:
        """Builds the config from the `transformer` section of the checkpoint's `config` metadata JSON."""
        if not isinstance(section, Mapping):
            raise ConfigError(f"the 'transformer' config section must be a JSON object, found {type(section).__name__}")
        version = parse_model_version(model_version, section)
        problems = _check_section(section)
        if problems:
            raise ConfigError("unsupported transformer config: " + "; ".join(problems))
        get = section.get
        caption_in_dit = not get("caption_proj_before_connector", False)
        config = cls(
            version=version,
            video=StreamConfig.from_metadata(section, "", VIDEO_DEFAULTS),
            audio=StreamConfig.from_metadata(section, "audio_", AUDIO_DEFAULTS),
            num_layers=get("num_layers", 48),
            caption_channels=get("caption_channels", 3840) if caption_in_dit else None,
            gated_attention=bool(get("apply_gated_attention", False)),
            cross_attention_adaln=bool(get("cross_attention_adaln", False)),
            # the reference's defaults keep what the configs before 2.5 did not state
            ff_bias=bool(get("ff_bias", True)),
            audio_ff_bias=bool(get("audio_ff_bias", True)),
            prompt_adaln=bool(get("use_prompt_adaln_single", True)),
            keyframe_embedding=bool(get("use_keyframes_abs_pos_embedding", False)),
            own_timestep_cross_modulation=RELEASES[version].own_timestep_cross_modulation,
            norm_eps=float(get("norm_eps", 1e-6)),
            rope_theta=float(get("positional_embedding_theta", 10000.0)),
            rope_type=get("rope_type", "interleaved"),
            rope_float64=get("frequencies_precision", "float32") == "float64",
            timestep_scale_multiplier=float(get("timestep_scale_multiplier", 1000)),
            # the reference's code default is 1 (gate factor 1/1000); the released configs all set 1000
            av_ca_timestep_scale_multiplier=float(get("av_ca_timestep_scale_multiplier", 1)),
        )
        config.validate()
        return config

    def validate(self) -> None:
        """Cross-field constraints the architecture relies on; raises ConfigError listing every violation."""
        problems = []
        v, a = self.video, self.audio
        if v.context_dim != v.width:
            problems.append(
                f"cross_attention_dim={v.context_dim} must equal num_attention_heads*attention_head_dim={v.width}"
            )
        if a.context_dim != a.width:
            problems.append(
                f"audio_cross_attention_dim={a.context_dim} must equal "
                f"audio_num_attention_heads*audio_attention_head_dim={a.width}"
            )
        if v.heads != a.heads:
            problems.append(
                f"num_attention_heads={v.heads} must equal audio_num_attention_heads={a.heads} "
                "(the audio-video cross-attention RoPE is split into the video head count)"
            )
        if len(v.max_pos) != 3:
            problems.append(f"positional_embedding_max_pos={list(v.max_pos)} must have 3 entries (time, y, x)")
        if len(a.max_pos) != 1:
            problems.append(f"audio_positional_embedding_max_pos={list(a.max_pos)} must have 1 entry (time)")
        for name, head_dim in (("attention_head_dim", v.head_dim), ("audio_attention_head_dim", a.head_dim)):
            if head_dim % 2:
                problems.append(f"{name}={head_dim} must be even (RoPE rotates pairs)")
        if problems:
            raise ConfigError("inconsistent transformer config: " + "; ".join(problems))

    def to_metadata(self) -> dict[str, Any]:
        """The `transformer` metadata section in the official layout (inverse of `from_metadata`)."""
        v, a = self.video, self.audio
        section: dict[str, Any] = {
            "_class_name": "AVTransformer3DModel",
            **FIXED_VALUES,
            "num_attention_heads": v.heads,
            "attention_head_dim": v.head_dim,
            "cross_attention_dim": v.context_dim,
            "in_channels": v.in_channels,
            "out_channels": v.out_channels,
            "positional_embedding_max_pos": list(v.max_pos),
            "audio_num_attention_heads": a.heads,
            "audio_attention_head_dim": a.head_dim,
            "audio_cross_attention_dim": a.context_dim,
            "audio_in_channels": a.in_channels,
            "audio_out_channels": a.out_channels,
            "audio_positional_embedding_max_pos": list(a.max_pos),
            "num_layers": self.num_layers,
            "norm_eps": self.norm_eps,
            "positional_embedding_theta": self.rope_theta,
            "rope_type": self.rope_type,
            "frequencies_precision": "float64" if self.rope_float64 else "float32",
            "timestep_scale_multiplier": self.timestep_scale_multiplier,
            "av_ca_timestep_scale_multiplier": self.av_ca_timestep_scale_multiplier,
            "causal_temporal_positioning": True,
            "use_embeddings_connector": True,
            "caption_channels": self.caption_channels if self.caption_channels is not None else 3840,
        }
        # the keys 2.5 added, where they differ from the reference's defaults (older configs leave them out)
        for key, value, default in (("ff_bias", self.ff_bias, True), ("audio_ff_bias", self.audio_ff_bias, True),
                                    ("use_prompt_adaln_single", self.prompt_adaln, True),
                                    ("use_keyframes_abs_pos_embedding", self.keyframe_embedding, False)):
            if value != default:
                section[key] = value
        if self.caption_channels is None or self.gated_attention or self.cross_attention_adaln:
            section.update(
                apply_gated_attention=self.gated_attention,
                cross_attention_adaln=self.cross_attention_adaln,
                caption_proj_before_connector=self.caption_channels is None,
                caption_projection_first_linear=False,
                caption_projection_second_linear=False,
                caption_proj_input_norm=False,
            )
        return section

    @classmethod
    def tiny(cls, version: ModelVersion | str = DEFAULT_VERSION, num_layers: int = 3) -> TransformerConfig:
        """A few blocks of small width with the released structure; used by every CPU test and the demo."""
        version = ModelVersion(version)
        release = RELEASES[version]
        return cls(
            version=version,
            video=StreamConfig(heads=2, head_dim=8, context_dim=16, in_channels=128, out_channels=128,
                               max_pos=(20, 2048, 2048)),
            audio=StreamConfig(heads=2, head_dim=4, context_dim=8, in_channels=128, out_channels=128, max_pos=(20,)),
            num_layers=num_layers,
            caption_channels=None if release.caption_before_connector else 12,
            gated_attention=release.gated_attention,
            cross_attention_adaln=release.cross_attention_adaln,
            ff_bias=release.ff_bias[0],
            audio_ff_bias=release.ff_bias[1],
            prompt_adaln=release.prompt_adaln,
            own_timestep_cross_modulation=release.own_timestep_cross_modulation,
            rope_type="split",
            rope_float64=True,
        )


_POSITIVE_INTS = (
    "num_attention_heads", "attention_head_dim", "cross_attention_dim", "in_channels", "out_channels",
    "audio_num_attention_heads", "audio_attention_head_dim", "audio_cross_attention_dim", "audio_in_channels",
    "audio_out_channels", "num_layers", "caption_channels",
)


def _check_section(section: Mapping[str, Any]) -> list[str]:
    """Every unsupported value in the section, as 'key=value (supported: …)' strings."""
    problems = []
    class_name = section.get("_class_name")
    if class_name is not None and class_name != "AVTransformer3DModel":
        problems.append(
            f"_class_name={class_name!r} (supported: 'AVTransformer3DModel'; this looks like a different model family, "
            "e.g. LTX-Video 0.9, which this pack does not run)"
        )
    for key, expected in FIXED_VALUES.items():
        if key in section and section[key] != expected:
            problems.append(f"{key}={section[key]!r} (supported: {expected!r})")
    for key in _POSITIVE_INTS:
        value = section.get(key)
        if key in section and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            problems.append(f"{key}={value!r} (must be a positive integer)")
    if section.get("rope_type", "interleaved") not in ROPE_TYPES:
        problems.append(f"rope_type={section['rope_type']!r} (supported: {', '.join(ROPE_TYPES)})")
    precision = section.get("frequencies_precision", "float32")
    if precision not in FREQUENCY_PRECISIONS:
        problems.append(f"frequencies_precision={precision!r} (supported: {', '.join(FREQUENCY_PRECISIONS)})")
    for key in ("positional_embedding_max_pos", "audio_positional_embedding_max_pos"):
        value = section.get(key, [1])
        if not isinstance(value, list) or not all(isinstance(p, (int, float)) and p > 0 for p in value):
            problems.append(f"{key}={value!r} (must be a list of positive numbers)")
    for key in ("norm_eps", "positional_embedding_theta", "timestep_scale_multiplier",
                "av_ca_timestep_scale_multiplier"):
        value = section.get(key, 1.0)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            problems.append(f"{key}={value!r} (must be a positive number)")
    for key in _KEYS_SINCE_2_5:
        if key in section and not isinstance(section[key], bool):
            problems.append(f"{key}={section[key]!r} (must be true or false)")
    if section.get("caption_proj_before_connector", False):
        for key in ("caption_projection_first_linear", "caption_projection_second_linear", "caption_proj_input_norm"):
            if section.get(key, False):
                problems.append(f"{key}={section[key]!r} (supported: False)")
    return problems
