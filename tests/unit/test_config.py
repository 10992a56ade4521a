"""TransformerConfig from checkpoint metadata: round trip and rejection of unsupported values."""

from __future__ import annotations

import pytest

from ltx2_core.model.transformer.config import ModelVersion, TransformerConfig, parse_model_version
from ltx2_core.errors import ConfigError, UnknownModelVersionError
from support.configs import RELEASED_2_0, RELEASED_2_3

@pytest.mark.parametrize("version", list(ModelVersion))
def test_tiny_round_trips_through_metadata(version):
    tiny = TransformerConfig.tiny(version)
    assert TransformerConfig.from_metadata(tiny.to_metadata(), version.value + ".0") == tiny


def test_every_unsupported_value_is_named_once():
    section = {**RELEASED_2_0, "qk_norm": "layer_norm", "rope_type": "spiral", "num_layers": 0}
    with pytest.raises(ConfigError) as info:
        TransformerConfig.from_metadata(section, "2.0.0")
    message = str(info.value)
    assert "qk_norm='layer_norm'" in message and "rms_norm" in message
    assert "rope_type='spiral'" in message and "num_layers=0" in message


def test_other_model_family_is_rejected():
    with pytest.raises(ConfigError, match="Transformer3DModel.*different model family"):
        TransformerConfig.from_metadata({"_class_name": "Transformer3DModel"}, None)


def test_inconsistent_widths_are_rejected():
    section = {**RELEASED_2_0, "cross_attention_dim": 3840}
    with pytest.raises(ConfigError, match="cross_attention_dim=3840 must equal"):
        TransformerConfig.from_metadata(section, "2.0.0")
    with pytest.raises(ConfigError, match="audio_num_attention_heads=16"):
        TransformerConfig.from_metadata({**RELEASED_2_0, "audio_num_attention_heads": 16,
                                         "audio_attention_head_dim": 128}, "2.0.0")


@pytest.mark.parametrize(("value", "expected"), [
    ("2.0.0", ModelVersion.V2_0), ("2.3.0", ModelVersion.V2_3), ("2.3", ModelVersion.V2_3),
    ("2.3.1-distilled", ModelVersion.V2_3)])
def test_model_version_strings(value, expected):
    assert parse_model_version(value, {}) is expected


def test_model_version_inferred_from_config_when_absent():
    assert parse_model_version(None, RELEASED_2_3) is ModelVersion.V2_3
    assert parse_model_version("", RELEASED_2_0) is ModelVersion.V2_0


@pytest.mark.parametrize("value", ["3.0.0", "0.9.8", "2.1", "2.30", "ltx"])
def test_unknown_model_version(value):
    with pytest.raises(UnknownModelVersionError, match=repr(value)):
        parse_model_version(value, {})
