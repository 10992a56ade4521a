"""Video VAE: config from metadata, loading from a single-file checkpoint, bad input."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from ltx2_core import ModelVersion
from ltx2_core.errors import ConfigError, KeyMismatchError, MissingConfigError
from ltx2_core.loader.vae_weights import load_video_decoder
from ltx2_core.model.video_vae import VideoVaeConfig
from support.checkpoints import other_components
from support.configs import CHECKPOINT_VAES, TINY_VAE, TINY_VAES
from support.video_vae import random_video_vae


def test_config_defaults_follow_the_reference():
    """No padding key: decoder reflect, encoder zeros; no timestep_conditioning key: conditioned (as ltx_core)."""
    section = {k: v for k, v in TINY_VAE.items() if k not in ("timestep_conditioning", "spatial_padding_mode")}
    config = VideoVaeConfig.from_metadata(section)
    assert (config.decoder_padding, config.encoder_padding, config.timestep_conditioning) == ("reflect", "zeros", True)
    assert VideoVaeConfig.from_metadata(TINY_VAES["2.3"]).decoder_padding == "zeros"


def test_unsupported_config_values_are_reported_together():
    section = {**TINY_VAE, "dims": 2, "norm_layer": "group_norm", "spatial_padding_mode": "circular",
               "decoder_blocks": [["attn_res_x", {"num_layers": 1}],
                                  ["res_x", {"num_layers": 1, "inject_noise": True}]]}
    with pytest.raises(ConfigError) as error:
        VideoVaeConfig.from_metadata(section)
    for part in ("dims=2", "group_norm", "circular", "attn_res_x", "inject_noise"):
        assert part in str(error.value)


def test_block_lists_must_compress_8x32():
    section = {**TINY_VAE, "decoder_blocks": TINY_VAE["decoder_blocks"][2:]}
    with pytest.raises(ConfigError, match="×4 in time and ×16 in space"):
        VideoVaeConfig.from_metadata(section)


def test_bf16_load(tiny_checkpoints):
    decoder = load_video_decoder(tiny_checkpoints["2.0"], dtype=torch.bfloat16)
    assert {t.dtype for t in decoder.state_dict().values()} == {torch.bfloat16}
    assert decoder(torch.randn(1, 128, 2, 2, 2, dtype=torch.bfloat16)).dtype == torch.bfloat16


def test_files_without_a_vae_are_rejected(tmp_path, tiny_checkpoints):
    path = tmp_path / "upsampler.safetensors"
    save_file({"initial_conv.weight": torch.zeros(1)}, str(path), metadata={"config": json.dumps({"dims": 3})})
    with pytest.raises(MissingConfigError, match="no 'vae' section"):
        load_video_decoder(path)
    tensors = dict(other_components(ModelVersion.V2_0))
    del tensors["vae.decoder.conv_in.conv.weight"]
    broken = tmp_path / "broken.safetensors"
    save_file(tensors, str(broken), metadata={"config": json.dumps({"vae": CHECKPOINT_VAES["2.0"]})})
    with pytest.raises(KeyMismatchError, match="conv_in.conv.weight"):
        load_video_decoder(broken)


@pytest.mark.parametrize("shape", [(1, 128, 2, 1, 1), (1, 16, 2, 4), (2, 8, 16, 1, 1), (1, 16, 0, 2, 2)])
def test_wrong_latents_are_rejected_before_decoding(shape):
    decoder = random_video_vae(TINY_VAE, "decoder")
    with pytest.raises(ValueError, match=r"\(B, 16, F', H', W'\)"):
        decoder(torch.zeros(shape))


def test_reflect_padding_needs_two_latent_cells():
    """LTX-2.0's decoder pads by reflection, which needs ≥ 2 cells; said before decoding, not by F.pad inside."""
    decoder = random_video_vae(TINY_VAE, "decoder")
    with pytest.raises(ValueError, match="at least 64×64 px"):
        decoder(torch.zeros(1, 16, 2, 1, 3))
    assert random_video_vae(TINY_VAES["2.3"], "decoder")(torch.zeros(1, 16, 2, 1, 1)).shape == (1, 3, 9, 32, 32)


@pytest.mark.parametrize("shape", [(1, 3, 10, 32, 32), (1, 3, 9, 48, 32), (1, 4, 9, 32, 32), (3, 9, 32, 32)])
def test_wrong_videos_are_rejected_before_encoding(shape):
    encoder = random_video_vae(TINY_VAE, "encoder")
    with pytest.raises(ValueError, match="1\\+8k frames"):
        encoder(torch.zeros(shape))


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_loaded_decoder_and_encoder_run_with_autograd_on(version, tiny_checkpoints):
    """Called outside torch.no_grad() (the test suite's default), as a caller may: the same result as inside it,
    and no graph kept (their buffers are written in place)."""
    from ltx2_core.loader.vae_weights import load_video_encoder
    from ltx2_core.model.video_vae.tiling import TilingConfig, decode_video

    decoder, encoder = load_video_decoder(tiny_checkpoints[version]), load_video_encoder(tiny_checkpoints[version])
    latent, video = torch.randn(1, 128, 2, 2, 3), torch.rand(1, 3, 9, 64, 96) * 2 - 1
    quiet = decoder(latent), encoder(video), decode_video(latent, decoder, TilingConfig())
    with torch.enable_grad():
        loud = decoder(latent), encoder(video), decode_video(latent, decoder, TilingConfig())
    for expected, got in zip(quiet, loud):
        assert not got.requires_grad
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
