"""Audio decoder and vocoders: config validation, shapes, causality, bad inputs, checkpoint loading errors."""

from __future__ import annotations

import copy
import json
import re

import pytest
import torch
from safetensors.torch import save_file
from support.configs import TINY_AUDIO_VAE, TINY_VOCODERS

from ltx2_core.errors import ConfigError, KeyMismatchError, MissingConfigError, ShapeMismatchError
from ltx2_core.loader.audio_weights import load_audio_decoder, load_vocoder
from ltx2_core.model.audio_vae import (
    AudioDecoder,
    AudioDecoderConfig,
    BigVGAN,
    HiFiGAN,
    VocoderConfig,
    VocoderWithBWE,
    build_vocoder,
    decode_audio,
)
from ltx2_core.model.audio_vae.bigvgan import hann_sinc_filter

# the released decoder layout at a small width (ch must equal z_channels × mel_bins / 4)
SMALL_AUDIO_VAE = copy.deepcopy(TINY_AUDIO_VAE)
SMALL_AUDIO_VAE["model"]["params"]["ddconfig"].update(ch=32, z_channels=2)


pytestmark = pytest.mark.usefixtures("one_thread")


def _decoder(section: dict = SMALL_AUDIO_VAE) -> AudioDecoder:
    decoder = AudioDecoder(AudioDecoderConfig.from_metadata(section)).eval()
    decoder.get_buffer("per_channel_statistics.std-of-means").fill_(1.0)
    return decoder


# ---------------------------------------------------------------------------------------------------- configs


def test_decoder_config_from_metadata():
    config = AudioDecoderConfig.from_metadata(TINY_AUDIO_VAE)
    assert (config.base_channels, config.channel_multipliers, config.res_blocks) == (128, (1, 2, 4), 1)
    assert (config.latent_channels, config.latent_mel_bins, config.latent_features) == (8, 16, 128)
    assert config.latents_per_second == 25.0  # 16000 / 160 / 4: exact in binary


def test_vocoder_configs_from_metadata():
    hifigan = VocoderConfig.from_metadata(TINY_VOCODERS["2.0"])
    assert hifigan.bwe is None and not hifigan.generator.amp and hifigan.sample_rate == 24000
    assert hifigan.generator.final_activation == "tanh" and hifigan.generator.samples_per_frame == 240
    bwe = VocoderConfig.from_metadata(TINY_VOCODERS["2.3"])
    assert bwe.generator.amp and bwe.generator.sample_rate == 16000 and bwe.sample_rate == 48000
    assert bwe.generator.final_activation == "clamp" and bwe.bwe.generator.final_activation is None
    assert (bwe.bwe.ratio, bwe.bwe.hop_length, bwe.bwe.n_fft) == (3, 80, 512)
    assert not bwe.generator.final_bias


def test_decoder_config_reports_every_problem_at_once():
    section = copy.deepcopy(TINY_AUDIO_VAE)
    section["model"]["params"]["ddconfig"].update(norm_type="group", causality_axis="width", ch_mult=[1, 2],
                                                 mid_block_add_attention=True, attn_resolutions=[256])
    with pytest.raises(ConfigError) as error:
        AudioDecoderConfig.from_metadata(section)
    message = str(error.value)
    for expected in ("norm_type='group'", "'pixel'", "causality_axis='width'", "'height'", "ch_mult=[1, 2]",
                     "mid_block_add_attention=True", "attn_resolutions=[256]"):
        assert expected in message


@pytest.mark.parametrize(("change", "expected"), [
    ({"mid_block_add_attention": None}, "mid_block_add_attention"),  # absent: the reference's default is True
    ({"ch": 64}, "z_channels × mel_bins/4 = 128"),
    ({"mel_bins": 62}, "mel_bins=62"),
    ({"out_ch": 1}, "out_ch=1"),
])
def test_decoder_config_rejects(change, expected):
    section = copy.deepcopy(TINY_AUDIO_VAE)
    ddconfig = section["model"]["params"]["ddconfig"]
    ddconfig.update(change)
    for key in [k for k, v in change.items() if v is None]:
        del ddconfig[key]
    with pytest.raises(ConfigError, match=expected):
        AudioDecoderConfig.from_metadata(section)


def test_decoder_config_needs_ddconfig():
    with pytest.raises(ConfigError, match="model.params.ddconfig"):
        AudioDecoderConfig.from_metadata({"model": {"params": {}}})


def test_hifigan_config_reports_every_problem_at_once():
    section = {**TINY_VOCODERS["2.0"], "resblock": "2", "stereo": False, "upsample_kernel_sizes": [16, 15, 8, 4]}
    with pytest.raises(ConfigError) as error:
        VocoderConfig.from_metadata(section)
    message = str(error.value)
    for expected in ("resblock='2'", "supported: '1'", "stereo=False", "upsample_kernel_sizes=[16, 15, 8, 4]"):
        assert expected in message


def test_bwe_config_reports_every_problem_at_once():
    section = copy.deepcopy(TINY_VOCODERS["2.3"])
    section["vocoder"]["activation"] = "snake"
    section["bwe"].update(resblock="1", num_mels=80, output_sampling_rate=44100)
    with pytest.raises(ConfigError) as error:
        VocoderConfig.from_metadata(section)
    message = str(error.value)
    for expected in ("vocoder.activation='snake'", "'snakebeta'", "bwe.resblock='1'", "'AMP1'", "bwe.num_mels=80"):
        assert expected in message


def test_bwe_config_checks_that_lengths_line_up():
    section = copy.deepcopy(TINY_VOCODERS["2.3"])
    section["bwe"]["upsample_rates"] = [4, 5, 2, 2, 2]
    section["bwe"]["upsample_kernel_sizes"] = [8, 11, 4, 4, 4]
    with pytest.raises(ConfigError, match="hop_length × output/input rate = 240"):
        VocoderConfig.from_metadata(section)


def test_modules_refuse_the_other_generator_kind():
    with pytest.raises(ValueError, match="AMP1"):
        BigVGAN(VocoderConfig.from_metadata(TINY_VOCODERS["2.0"]).generator)
    with pytest.raises(ValueError, match="resblock"):
        HiFiGAN(VocoderConfig.from_metadata(TINY_VOCODERS["2.3"]).generator)


# ---------------------------------------------------------------------------------------------------- shapes


@pytest.mark.parametrize("frames", [1, 2, 4])
def test_decoder_output_shape(frames):
    assert _decoder()(torch.randn(2, 2, frames, 16)).shape == (2, 2, 4 * frames - 3, 64)


def test_decoder_is_causal_in_time():
    decoder = _decoder()
    latent = torch.randn(1, 2, 4, 16)
    changed = latent.clone()
    changed[:, :, 3] += 1.0
    before, after = decoder(latent), decoder(changed)
    # latent frame 3 first shows in mel frame 4·3 - 3 - 1 (the upsampling convolutions look one frame back)
    torch.testing.assert_close(before[:, :, :8], after[:, :, :8], rtol=1e-6, atol=1e-6)
    assert (before[:, :, 8:] - after[:, :, 8:]).abs().max() > 1e-3


def test_decoder_un_normalizes_per_channel_and_mel_bin():
    decoder = _decoder()
    mean = torch.arange(32.0)
    decoder.get_buffer("per_channel_statistics.mean-of-means").copy_(mean)
    decoder.get_buffer("per_channel_statistics.std-of-means").fill_(2.0)
    latent = torch.randn(1, 2, 3, 16)
    expected = latent * 2 + mean.view(2, 1, 16)  # feature c·16 + f belongs to channel c, mel bin f
    torch.testing.assert_close(decoder.un_normalize(latent), expected)


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_vocoder_output_shape_and_range(version):
    vocoder = build_vocoder(VocoderConfig.from_metadata(TINY_VOCODERS[version])).eval()
    assert isinstance(vocoder, HiFiGAN if version == "2.0" else VocoderWithBWE)
    waveform = vocoder(torch.randn(2, 2, 2, 64) * 3)
    assert waveform.shape == (2, 2, 2 * {"2.0": 240, "2.3": 480}[version])
    assert waveform.abs().max() <= 1.0


def test_decode_audio_returns_float32_waveform_and_rate():
    decoder = _decoder()
    vocoder = build_vocoder(VocoderConfig.from_metadata(TINY_VOCODERS["2.0"])).eval()
    waveform, rate = decode_audio(torch.randn(1, 2, 2, 16, dtype=torch.float64), decoder.to(torch.bfloat16), vocoder)
    assert rate == 24000 and waveform.dtype == torch.float32 and waveform.shape == (1, 2, 5 * 240)


@pytest.mark.parametrize("shape", [(2, 16, 8), (1, 8, 4, 16), (1, 2, 4, 32), (1, 2, 4, 16, 1), (1, 2, 0, 16)])
def test_decoder_rejects_wrong_latent_shapes_before_computing(shape):
    with torch.device("meta"):
        decoder = AudioDecoder(AudioDecoderConfig.from_metadata(SMALL_AUDIO_VAE))
    # the meta model cannot compute on a CPU tensor, so a ValueError proves the check comes first
    with pytest.raises(ValueError, match=re.escape("(B, 2, T, 16)") + ".*" + re.escape(str(shape))):
        decoder(torch.zeros(shape))


def test_decoder_names_the_released_latent_shape():
    decoder = AudioDecoder(AudioDecoderConfig.from_metadata(TINY_AUDIO_VAE)).to("meta")
    with pytest.raises(ValueError, match=r"\(B, 8, T, 16\)"):
        decoder(torch.zeros(1, 8, 4, 64))


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_vocoders_reject_wrong_mel_shapes(version):
    vocoder = build_vocoder(VocoderConfig.from_metadata(TINY_VOCODERS[version]))
    with pytest.raises(ValueError, match=r"\(B, 2, T, 64\).*\(1, 2, 64, 7\)"):
        vocoder(torch.zeros(1, 2, 64, 7))


# ---------------------------------------------------------------------------------------------------- loading


def _write_bundle(path, *, sections: dict | None = None, metadata: dict | None = None, drop: str | None = None,
                  reshape: str | None = None):
    """A small checkpoint with the audio decoder (SMALL_AUDIO_VAE) and a tiny vocoder, built from `sections`.

    `metadata` replaces the config written into the file (default: `sections`); `drop` / `reshape` spoil one tensor.
    """
    sections = sections if sections is not None else {"audio_vae": SMALL_AUDIO_VAE, "vocoder": TINY_VOCODERS["2.0"]}
    tensors = {}
    if "audio_vae" in sections:
        for key, value in AudioDecoder(AudioDecoderConfig.from_metadata(sections["audio_vae"])).state_dict().items():
            stats = key.startswith("per_channel_statistics.")
            tensors[("audio_vae." if stats else "audio_vae.decoder.") + key] = torch.randn(value.shape)
        tensors["audio_vae.per_channel_statistics.channel"] = torch.zeros(32)  # unused statistic: ignored
    if "vocoder" in sections:
        vocoder = build_vocoder(VocoderConfig.from_metadata(sections["vocoder"]))
        tensors |= {"vocoder." + key: value.clone() for key, value in vocoder.state_dict().items()}
    if drop:
        del tensors[drop]
    if reshape:
        tensors[reshape] = torch.zeros(3)
    save_file(tensors, str(path), metadata={"config": json.dumps(metadata if metadata is not None else sections)})
    return path


def test_loads_small_bundle_on_the_requested_dtype(tmp_path):
    path = _write_bundle(tmp_path / "bundle.safetensors")
    decoder = load_audio_decoder(path, dtype=torch.bfloat16)
    vocoder = load_vocoder(path)
    assert decoder.conv_in.conv.weight.dtype == torch.bfloat16 and not decoder.training
    assert isinstance(vocoder, HiFiGAN) and vocoder.conv_pre.weight.dtype == torch.float32


def test_bwe_vocoder_recomputes_the_resampler_filter(tmp_path):
    path = _write_bundle(tmp_path / "bundle.safetensors", sections={"vocoder": TINY_VOCODERS["2.3"]})
    vocoder = load_vocoder(path, dtype=torch.bfloat16)
    assert isinstance(vocoder, VocoderWithBWE)
    assert vocoder.mel_stft.mel_basis.dtype == torch.bfloat16  # from the file
    # not in the file: rebuilt, in fp32 although the file is bf16
    torch.testing.assert_close(vocoder.resampler.filter, hann_sinc_filter(3), atol=1e-7, rtol=1e-6)
    assert not any(t.is_meta for t in [*vocoder.parameters(), *vocoder.buffers()])


@pytest.mark.parametrize(("section", "loader"), [("vocoder", load_vocoder), ("audio_vae", load_audio_decoder)])
def test_missing_section_names_the_file(tmp_path, section, loader):
    sections = {"audio_vae": SMALL_AUDIO_VAE, "vocoder": TINY_VOCODERS["2.0"]}
    del sections[section]
    path = _write_bundle(tmp_path / "no-section.safetensors", sections=sections)
    with pytest.raises(MissingConfigError, match=rf"no-section\.safetensors.*no '{section}' section"):
        loader(path)


def test_bad_config_names_the_file(tmp_path):
    path = _write_bundle(tmp_path / "bad.safetensors", metadata={"vocoder": {**TINY_VOCODERS["2.0"], "stereo": False}})
    with pytest.raises(ConfigError, match=r"bad\.safetensors.*stereo=False"):
        load_vocoder(path)


@pytest.mark.parametrize(("loader", "key"), [
    (load_vocoder, "vocoder.conv_post.weight"),
    (load_audio_decoder, "audio_vae.decoder.up.1.upsample.conv.conv.bias"),
    (load_audio_decoder, "audio_vae.per_channel_statistics.std-of-means"),
])
def test_missing_tensor_is_named(tmp_path, loader, key):
    path = _write_bundle(tmp_path / "partial.safetensors", drop=key)
    with pytest.raises(KeyMismatchError, match=r"partial\.safetensors.*1 missing"):
        loader(path)


def test_wrong_tensor_shape_is_named(tmp_path):
    path = _write_bundle(tmp_path / "shape.safetensors", reshape="vocoder.ups.0.bias")
    with pytest.raises(ShapeMismatchError, match=r"'vocoder\.ups\.0\.bias' has shape \[3\]"):
        load_vocoder(path)
