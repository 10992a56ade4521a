"""LTX-2.5's transformer file (`diffusion_models/ltx-2.5-22b-*-transformer-bf16.safetensors`: the DiT and the text
connectors under `model.diffusion_model.`, `config.transformer`, `model_version`, `gemma_source_checkpoint`) through
our transformer loader: its structure read from the metadata, its weights, fp8 at load, LoRAs, and the bad values."""

from __future__ import annotations

import json

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_inputs, demo_lora, demo_transformer
from ltx2_core.errors import ConfigError
from ltx2_core.loader.transformer import load_transformer
from ltx2_core.memory.plan import text_kv_bytes
from ltx2_core.model.transformer.config import parse_model_version
from ltx2_core.releases import ModelVersion
from support.configs import RELEASED_2_3, RELEASED_2_5, released_transformer_configs
from support.transformer25 import FILE_NAME, transformer25_metadata, write_transformer25

CONFIG = TransformerConfig.tiny("2.5")


@pytest.fixture(scope="module")
def model():
    return demo_transformer(CONFIG, seed=5)


@pytest.mark.parametrize("connectors", [True, False], ids=["released", "dit-only"])
def test_the_file_loads_as_written(tmp_path, model, connectors):
    path = write_transformer25(tmp_path / FILE_NAME, model.state_dict(), CONFIG, connectors=connectors)
    loaded = load_transformer(path)
    assert loaded.config == CONFIG
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name  # a pure copy through the file


def test_the_released_switches_come_from_the_metadata():
    config = released_transformer_configs()["2.5"]
    assert config.version is ModelVersion.V2_5
    assert (config.ff_bias, config.audio_ff_bias, config.prompt_adaln, config.static_text_kv) == (False, False, False,
                                                                                                  True)
    assert config.own_timestep_cross_modulation  # the 1.2.0 reference's cross-attention modulation
    assert text_kv_bytes(config, 4) > 0 and text_kv_bytes(released_transformer_configs()["2.3"], 4) == 0
    # without a model_version a 2.5 key names the release; 2.3's keys alone do not
    assert parse_model_version(None, RELEASED_2_5) is ModelVersion.V2_5
    assert parse_model_version(None, RELEASED_2_3) is ModelVersion.V2_3
    # the section round-trips, and configs before 2.5 do not gain its keys
    assert TransformerConfig.from_metadata(CONFIG.to_metadata(), "2.5.0") == CONFIG
    assert "ff_bias" not in TransformerConfig.tiny("2.3").to_metadata()


def test_a_switch_that_is_not_a_boolean_is_refused():
    with pytest.raises(ConfigError, match="use_prompt_adaln_single='no' \\(must be true or false\\)"):
        TransformerConfig.from_metadata({**RELEASED_2_5, "use_prompt_adaln_single": "no"}, "2.5.0")


def test_the_metadata_is_what_the_released_file_carries():
    metadata = transformer25_metadata(CONFIG)
    assert set(metadata) == {"config", "model_version", "gemma_source_checkpoint"}
    assert list(json.loads(metadata["config"])) == ["transformer"]  # no VAE / audio sections in this file
    assert json.loads(metadata["gemma_source_checkpoint"])["gemma_version"]


def test_fp8_at_load_and_a_lora_on_the_bias_free_feed_forwards(tmp_path, model):
    path = write_transformer25(tmp_path / FILE_NAME, model.state_dict(), CONFIG)
    lora = demo_lora(model, seed=2)
    fused = load_transformer(path, loras=[(lora, 0.5)])
    plain = load_transformer(path)
    ff = "transformer_blocks.0.ff.net.2.weight"
    pair = lora.pairs[ff]
    torch.testing.assert_close(fused.state_dict()[ff], plain.state_dict()[ff] + 0.5 * pair.up @ pair.down,
                               atol=1e-6, rtol=1e-6)
    quantized = load_transformer(path, fp8="quantize")
    assert quantized.transformer_blocks[0].ff.net[2].bias is None
    video, audio, run = demo_inputs(quantized)
    assert all(torch.isfinite(out).all() for out in quantized(video, audio, run))
