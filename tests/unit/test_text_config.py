"""TextConfig (feature extractor + connectors) from checkpoint metadata: released sizes equal the reference's
parameter set, tiny round trip, and every unsupported value named."""

from __future__ import annotations

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.errors import ConfigError
from ltx2_core.model.text import TextProjection
from ltx2_core.text_config import FeatureExtractorKind, TextConfig
from support.configs import RELEASED_2_0, RELEASED_2_3
from support.reference import import_ltx_core


@pytest.mark.parametrize("section, kind, widths", [
    (RELEASED_2_0, FeatureExtractorKind.MEAN_RANGE, (3840, 3840)),
    (RELEASED_2_3, FeatureExtractorKind.PER_TOKEN_RMS, (4096, 2048)),
], ids=["2.0", "2.3"])
def test_released_text_path_has_the_reference_parameter_set(section, kind, widths):
    import_ltx_core()
    from ltx_core.text_encoders.gemma.encoders.encoder_configurator import EmbeddingsProcessorConfigurator

    config = TextConfig.from_metadata(section)
    assert config.kind is kind and (config.video.width, config.audio.width) == widths
    config.check_matches(TransformerConfig.from_metadata(section))
    with torch.device("meta"):
        ours = TextProjection(config, hidden_size=3840, num_hidden_states=49)
        reference = EmbeddingsProcessorConfigurator.from_config({"transformer": section})
    shapes = lambda m: {k: tuple(v.shape) for k, v in m.state_dict().items()}  # noqa: E731
    assert shapes(ours) == shapes(reference)


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
