"""TextConfig (feature extractor + connectors) from checkpoint metadata: tiny round trip, and every unsupported value
named."""

from __future__ import annotations

import pytest

from ltx2_core import TransformerConfig
from ltx2_core.errors import ConfigError
from ltx2_core.model.text.config import TextConfig
from support.configs import RELEASED_2_3


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_tiny_round_trips_through_metadata(version):
    transformer = TransformerConfig.tiny(version)
    tiny = TextConfig.tiny(transformer)
    assert TextConfig.from_metadata(transformer.to_metadata() | tiny.to_metadata()) == tiny
    tiny.check_matches(transformer)


def test_every_unsupported_value_is_named():
    section = {**RELEASED_2_3, "connector_num_layers": 0, "caption_proj_input_norm": True,
               "connector_positional_embedding_max_pos": [4096, 1], "connector_norm_output": False}
    del section["caption_projection_first_linear"]
    with pytest.raises(ConfigError) as error:
        TextConfig.from_metadata(section)
    message = str(error.value)
    for part in ("connector_num_layers=0", "caption_proj_input_norm=True (supported: False)",
                 "caption_projection_first_linear is missing", "connector_positional_embedding_max_pos=[4096, 1]",
                 "connector_norm_output=False"):
        assert part in message


def test_connectors_must_fit_the_transformer():
    transformer = TransformerConfig.tiny("2.3")
    text = TextConfig.tiny(TransformerConfig.tiny("2.0"))
    with pytest.raises(ConfigError, match="video connector width 12 != transformer cross_attention_dim 16"):
        text.check_matches(transformer)
