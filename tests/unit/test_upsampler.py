"""Latent upsampler: config validation, parameter names, the recomputed blur kernel, and bad files and latents."""

from __future__ import annotations

import json
import re

import pytest
import torch
from safetensors.torch import save_file

from ltx2_core.errors import CheckpointError, ConfigError, KeyMismatchError, MissingConfigError, ShapeMismatchError
from ltx2_core.loader.upsampler_weights import load_upsampler
from ltx2_core.model.statistics import PerChannelStatistics
from ltx2_core.model.upsampler import LatentUpsampler, UpsamplerConfig, binomial_kernel, upsample_latent

KERNEL = "upsampler.blur_down.kernel"
# the LTX-2.0 x2-1.0 file's config (spec §5, §8)
RELEASED_2_0 = {"_class_name": "LatentUpsampler", "in_channels": 128, "mid_channels": 1024,
                "num_blocks_per_stage": 4, "dims": 3, "spatial_upsample": True, "temporal_upsample": False,
                "spatial_scale": 2.0, "rational_resampler": True}


def _write(path, config: UpsamplerConfig | dict | None, tensors: dict[str, torch.Tensor] | None = None):
    """An upsampler file from `config` with random weights (or `tensors`); config None = no metadata."""
    if tensors is None:
        tensors = {k: torch.randn(v.shape) for k, v in LatentUpsampler(config).state_dict().items()}
    flat = config.to_metadata() if isinstance(config, UpsamplerConfig) else config
    save_file(tensors, path, metadata=None if flat is None else {"config": json.dumps(flat)})
    return path


def test_released_configs_parse():
    assert UpsamplerConfig.from_metadata(RELEASED_2_0) == UpsamplerConfig(128, 1024, 4, 2.0, True)
    plain = UpsamplerConfig.from_metadata({**RELEASED_2_0, "rational_resampler": False})
    assert plain == UpsamplerConfig(128, 1024, 4, 2.0, False)
    assert UpsamplerConfig.from_metadata(plain.to_metadata()) == plain
    # missing keys take the reference configurator's defaults, so both sides build the same model
    assert UpsamplerConfig.from_metadata({}) == UpsamplerConfig(128, 512, 4, 2.0, False)


@pytest.mark.parametrize("key, value, supported", [
    ("temporal_upsample", True, "spatial_upsample true for a spatial file, or temporal_upsample true"),
    ("spatial_upsample", False, "spatial_upsample true for a spatial file, or temporal_upsample true"),
    ("dims", 2, "3"),
    ("_class_name", "TemporalUpsampler", "'LatentUpsampler'"),
    ("spatial_scale", 3.0, "0.75, 1.5, 2.0, 4.0"),
    ("mid_channels", 48, "multiple of 32"),
    ("mid_channels", 16, ">= 32"),
    ("in_channels", "128", ">= 1"),
    ("num_blocks_per_stage", -1, ">= 0"),
    ("rational_resampler", "yes", "true, false"),
])
def test_unsupported_value_names_key_and_supported_values(key, value, supported):
    with pytest.raises(ConfigError) as info:
        UpsamplerConfig.from_metadata({**RELEASED_2_0, key: value})
    assert f"{key}={value!r}" in str(info.value) and supported in str(info.value)


def test_plain_form_accepts_only_x2():
    """Without the rational resampler the reference always doubles, whatever `spatial_scale` says."""
    with pytest.raises(ConfigError, match=r"spatial_scale=1.5 \(supported without rational_resampler: 2.0\)"):
        UpsamplerConfig.from_metadata({**RELEASED_2_0, "rational_resampler": False, "spatial_scale": 1.5})


def test_every_problem_is_reported_in_one_error():
    with pytest.raises(ConfigError) as info:
        UpsamplerConfig.from_metadata({**RELEASED_2_0, "dims": 2, "temporal_upsample": True, "mid_channels": 100})
    assert all(k in str(info.value) for k in ("dims=2", "temporal_upsample=True", "mid_channels=100"))


@pytest.mark.parametrize("rational, upsampler_keys", [
    (True, {"upsampler.conv.weight", "upsampler.conv.bias"}),
    (False, {"upsampler.0.weight", "upsampler.0.bias"}),
])
def test_parameter_names_are_the_files(rational, upsampler_keys):
    model = LatentUpsampler(UpsamplerConfig(16, 32, 2, 2.0, rational))
    keys = set(model.state_dict())
    assert {k for k in keys if k.startswith("upsampler.")} == upsampler_keys
    assert {"initial_conv.weight", "initial_norm.bias", "res_blocks.1.conv2.weight", "res_blocks.0.norm1.weight",
            "post_upsample_res_blocks.1.norm2.bias", "final_conv.weight"} <= keys
    # the kernel is a buffer under the file's name (`blur_down`, not `blur`), but never part of the state dict
    assert (KERNEL in dict(model.named_buffers())) == rational and KERNEL not in keys


def test_blur_kernel_is_the_normalised_binomial():
    row = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0])
    # products of small integers over a power of two: exact in fp32, so exact equality holds on any CPU
    torch.testing.assert_close(binomial_kernel(), (torch.outer(row, row) / 256)[None, None], rtol=0, atol=0)


def test_kernel_is_recomputed_after_a_meta_build(tmp_path):
    config = UpsamplerConfig.tiny(rational_resampler=True, spatial_scale=1.5)
    model = load_upsampler(_write(tmp_path / "u.safetensors", config))
    torch.testing.assert_close(model.upsampler.blur_down.kernel, binomial_kernel(), rtol=0, atol=0)  # exact, as above


def test_file_with_a_different_blur_kernel_is_rejected(tmp_path):
    config = UpsamplerConfig.tiny(rational_resampler=True)
    tensors = {k: torch.randn(v.shape) for k, v in LatentUpsampler(config).state_dict().items()}
    path = _write(tmp_path / "u.safetensors", config, {**tensors, KERNEL: torch.full((1, 1, 5, 5), 1 / 25)})
    with pytest.raises(CheckpointError, match="not the normalised"):
        load_upsampler(path)


def test_blur_kernel_in_a_plain_file_is_an_unexpected_key(tmp_path):
    config = UpsamplerConfig.tiny(rational_resampler=False)
    tensors = {k: torch.randn(v.shape) for k, v in LatentUpsampler(config).state_dict().items()}
    path = _write(tmp_path / "u.safetensors", config, {**tensors, KERNEL: binomial_kernel()})
    with pytest.raises(KeyMismatchError, match="unexpected"):
        load_upsampler(path)


def test_load_casts_to_dtype_and_runs(tmp_path):
    config = UpsamplerConfig.tiny(rational_resampler=True, spatial_scale=1.5)  # x1.5 runs the fp32 blur kernel too
    model = load_upsampler(_write(tmp_path / "u.safetensors", config), dtype=torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    stats = PerChannelStatistics(config.in_channels)
    stats.get_buffer("std-of-means").fill_(1.0)
    out = upsample_latent(torch.randn(1, 16, 2, 3, 4), model, stats)
    assert out.shape == (1, 16, 2, 5, 6) and out.dtype == torch.float32 and out.isfinite().all()


def test_missing_config_names_the_file_and_what_to_use(tmp_path):
    path = _write(tmp_path / "u.safetensors", None, {"initial_conv.weight": torch.zeros(2)})
    with pytest.raises(MissingConfigError, match="u.safetensors.*spatial-upscaler-x2"):
        load_upsampler(path)


def test_bad_config_value_names_the_file(tmp_path):
    path = _write(tmp_path / "u.safetensors", {**RELEASED_2_0, "temporal_upsample": True},
                  {"initial_conv.weight": torch.zeros(2)})
    with pytest.raises(ConfigError, match=r"u\.safetensors: .*temporal_upsample=True"):
        load_upsampler(path)


def test_ltx_model_checkpoint_is_rejected(tiny_checkpoints):
    with pytest.raises(CheckpointError, match="model checkpoint, not a latent upsampler.*spatial-upscaler"):
        load_upsampler(tiny_checkpoints["2.0"])


def test_weights_of_another_size_are_rejected(tmp_path):
    small = UpsamplerConfig.tiny(rational_resampler=True)
    tensors = {k: torch.randn(v.shape) for k, v in LatentUpsampler(small).state_dict().items()}
    path = _write(tmp_path / "u.safetensors", {**small.to_metadata(), "in_channels": 8}, tensors)
    with pytest.raises(ShapeMismatchError, match="initial_conv.weight"):
        load_upsampler(path)


@pytest.mark.parametrize("shape", [(1, 16, 4, 4), (1, 8, 2, 4, 4), (16, 2, 4, 4, 1, 1), (0, 16, 2, 4, 4)])
def test_wrong_latent_shape_is_rejected_before_compute(shape):
    model = LatentUpsampler(UpsamplerConfig.tiny())
    model.forward = None  # running the model would raise TypeError instead
    with pytest.raises(ValueError, match=re.escape(f"(B, C, F, H, W) with C=16, got {shape}")):
        upsample_latent(torch.zeros(shape), model, PerChannelStatistics(16))


@pytest.mark.parametrize("scale, size", [(2.0, (6, 8)), (1.5, (5, 6)), (0.75, (3, 3)), (4.0, (12, 16))])
def test_output_size_per_scale(scale, size):
    model = LatentUpsampler(UpsamplerConfig.tiny(rational_resampler=True, spatial_scale=scale)).eval()
    assert model(torch.randn(2, 16, 3, 3, 4)).shape == (2, 16, 3, *size)


TEMPORAL = {**RELEASED_2_0, "spatial_upsample": False, "temporal_upsample": True, "rational_resampler": False}


def test_the_temporal_form_parses_and_doubles_the_frames_less_one():
    config = UpsamplerConfig.from_metadata(TEMPORAL)
    assert config.temporal and UpsamplerConfig.from_metadata(config.to_metadata()) == config
    # the reference's temporal form ignores the scale and the resampler, so neither is refused there
    assert UpsamplerConfig.from_metadata({**TEMPORAL, "spatial_scale": 1.5, "rational_resampler": True}).temporal
    model = LatentUpsampler(UpsamplerConfig.tiny(temporal=True))
    assert {k for k in model.state_dict() if k.startswith("upsampler.")} == {"upsampler.0.weight", "upsampler.0.bias"}
    assert model.upsampler[0].out_channels == 2 * GROUPS_WIDTH
    assert model(torch.randn(2, 16, 4, 3, 5)).shape == (2, 16, 7, 3, 5)


GROUPS_WIDTH = 32  # the tiny config's width


def test_temporal_shuffle_puts_channel_pairs_on_consecutive_frames():
    from ltx2_core.model.upsampler import TemporalShuffle

    x = torch.arange(2 * 4 * 3 * 2 * 2, dtype=torch.float32).reshape(2, 4, 3, 2, 2)
    y = TemporalShuffle()(x)
    assert y.shape == (2, 2, 6, 2, 2)
    for c in range(2):
        for f in range(3):
            for p in range(2):  # "b (c p) f h w -> b c (f p) h w": an index permutation, so exact
                assert torch.equal(y[:, c, 2 * f + p], x[:, 2 * c + p, f])


@pytest.mark.parametrize("flat", [{"spatial_upsample": True, "temporal_upsample": True},
                                  {"spatial_upsample": False, "temporal_upsample": False}])
def test_both_directions_or_none_is_refused(flat):
    with pytest.raises(ConfigError, match="spatial_upsample true for a spatial file, or temporal_upsample true"):
        UpsamplerConfig.from_metadata({**RELEASED_2_0, **flat})


def test_a_file_of_the_other_direction_is_refused_naming_the_flag(tmp_path):
    spatial = _write(tmp_path / "spatial.safetensors", UpsamplerConfig.tiny())
    temporal = _write(tmp_path / "temporal.safetensors", UpsamplerConfig.tiny(temporal=True))
    assert load_upsampler(temporal, temporal=True).config.temporal
    with pytest.raises(ConfigError, match="is a spatial latent upsampler .* give it as --upsampler"):
        load_upsampler(spatial, temporal=True)
    with pytest.raises(ConfigError, match="is a temporal latent upsampler .* give it as --temporal-upsampler"):
        load_upsampler(temporal)


def test_the_stages_upsample_keyframes_in_space_and_clips_in_time():
    """`stages.upsample` also upsamples generated keyframes as a clip of their own (DFR's slots); `upsample_time`
    doubles the frames less one at twice the rate; each refuses the other direction's upsampler."""
    import types

    from ltx2_core.stages import AVLatent, upsample, upsample_time

    statistics = PerChannelStatistics(16)
    statistics.load_state_dict({"mean-of-means": torch.randn(16), "std-of-means": torch.rand(16) + 0.5})
    decoders = types.SimpleNamespace(video=types.SimpleNamespace(per_channel_statistics=statistics))
    spatial = LatentUpsampler(UpsamplerConfig.tiny(rational_resampler=False)).eval()
    temporal = LatentUpsampler(UpsamplerConfig.tiny(temporal=True)).eval()
    latent = AVLatent(torch.randn(1, 16, 3, 2, 3), torch.randn(1, 8, 5, 16), 24.0, keyframes=torch.randn(1, 16, 2, 2, 3))
    up = upsample(latent, spatial, decoders)
    assert up.video.shape == (1, 16, 3, 4, 6) and up.audio is latent.audio
    torch.testing.assert_close(up.keyframes, upsample_latent(latent.keyframes, spatial, statistics), rtol=0, atol=0)
    doubled = upsample_time(latent, temporal, decoders)
    assert doubled.video.shape == (1, 16, 5, 2, 3) and doubled.fps == 48.0 and doubled.keyframes is None
    assert doubled.audio is latent.audio  # (N - 1)·2 + 1 frames at twice the rate: the same duration
    with pytest.raises(ValueError, match="this is the temporal latent upsampler"):
        upsample(latent, temporal, decoders)
    with pytest.raises(ValueError, match="need the temporal x2 upsampler"):
        upsample_time(latent, spatial, decoders)
