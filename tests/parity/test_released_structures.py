"""The released configurations (LTX-2.0 and 2.3: transformer, text path, video VAE) build exactly the reference's
parameter sets: every name and shape, compared on `meta` without allocating a weight."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.model.text import TextProjection
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.model.video_vae import VideoDecoder, VideoEncoder, VideoVaeConfig
from ltx2_core.model.text.config import FeatureExtractorKind, TextConfig
from support.configs import RELEASED_2_0, RELEASED_2_3, RELEASED_VAE_2_0, RELEASED_VAE_2_3
from support.reference import import_ltx_core


@pytest.mark.parametrize(("section", "version", "params"), [
    (RELEASED_2_0, "2.0.0", 18.876e9), (RELEASED_2_3, "2.3.0", 18.989e9)])
def test_released_config_builds_the_reference_parameter_set(section, version, params):
    """On `meta`: every parameter name and shape equals the reference model built from the same section."""
    config = TransformerConfig.from_metadata(section, version)
    assert config.version.value == version[:3]
    with torch.device("meta"):
        ours = LTX2Transformer(config)
    import_ltx_core()
    from ltx_core.model.transformer import LTXModelConfigurator

    with torch.device("meta"):
        ref = LTXModelConfigurator.from_config({"transformer": section})
    assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in ref.state_dict().items()}
    assert sum(p.numel() for p in ours.parameters()) == pytest.approx(params, rel=1e-3)



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



@pytest.mark.parametrize("section", [RELEASED_VAE_2_0, RELEASED_VAE_2_3], ids=["2.0", "2.3"])
def test_released_configs_have_the_reference_parameters(section):
    """Names and shapes equal ltx_core's configurators' (meta builds), e.g. 528 M / 694 M parameters for 2.0."""
    import_ltx_core()
    from ltx_core.model.video_vae import VideoDecoderConfigurator, VideoEncoderConfigurator

    config = VideoVaeConfig.from_metadata(section)
    with torch.device("meta"):
        pairs = [(VideoDecoder(config), VideoDecoderConfigurator.from_config({"vae": section})),
                 (VideoEncoder(config), VideoEncoderConfigurator.from_config({"vae": section}))]
    for ours, ref in pairs:
        assert {k: v.shape for k, v in ours.state_dict().items()} == {k: v.shape for k, v in ref.state_dict().items()}
    if section is RELEASED_VAE_2_0:
        assert [round(sum(p.numel() for p in m.parameters()) / 1e6) for m, _ in pairs] == [528, 694]
