"""Which release a component file is, where its header names none: a VAE or audio VAE saved out of a 2.0 / 2.3 bundle
(its `config` sections, no `model_version`), a VAE file without any metadata (its shapes), an upsampler (its
resampler's form); so that files of two releases are refused together before any model work, and a folder's two
transformers of one release are a choice left to the user."""

from __future__ import annotations

import shutil

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.__main__ import main
from ltx2_core.demo import DEMO_VAES, demo_transformer
from ltx2_core.errors import CheckpointError
from ltx2_core.loader.file_kinds import FileKind, file_kind
from ltx2_core.model.video_vae import VideoDecoder, VideoEncoder, VideoVaeConfig
from ltx2_core.model.video_vae.released import RELEASED_VAE_SECTIONS
from ltx2_core.model_files import ModelFiles
from support.gemma4 import write_gemma4_file
from support.model_files import write_header_only, write_lora, write_split_vaes, write_upsampler
from support.transformer25 import write_transformer25
from support.video_vae25 import write_conv_vae25


@pytest.fixture(scope="module")
def split(tiny_checkpoints, tmp_path_factory):
    """Each bundle's VAE and audio VAE saved out as files of their own, by release."""
    folder = tmp_path_factory.mktemp("split")
    return {version: write_split_vaes(tiny_checkpoints[version], folder) for version in ("2.0", "2.3")}


@pytest.fixture(scope="module")
def ltx25(tmp_path_factory):
    """An LTX-2.5 transformer file and its Gemma 4 text encoder file."""
    folder = tmp_path_factory.mktemp("ltx25")
    config = TransformerConfig.tiny("2.5")
    transformer = write_transformer25(folder / "ltx-2.5-22b-dev-transformer-bf16.safetensors",
                                      demo_transformer(config).state_dict(), config)
    return transformer, write_gemma4_file(folder / "gemma4-12b-with-proj-ltx-2.5-bf16.safetensors")


def test_split_vae_files_take_the_release_of_their_form(split, tmp_path):
    """The video VAE by its decoder's resampling blocks and padding, the audio VAE by its vocoder (2.0's HiFi-GAN;
    2.3's and 2.5's carry the same BigVGAN + bandwidth extension, which only a model_version tells apart)."""
    assert file_kind(split["2.0"][0]) == FileKind("video VAE", "2.0", "convolutional decoder")
    assert file_kind(split["2.3"][0]) == FileKind("video VAE", "2.3", "convolutional decoder")
    assert file_kind(split["2.0"][1]) == FileKind("audio VAE", "2.0")
    assert file_kind(split["2.3"][1]) == FileKind("audio VAE", None)
    # 2.5's convolutional VAE has a form of its own: without its model_version it names no release (not 2.3)
    assert file_kind(write_conv_vae25(tmp_path / "conv25.safetensors", DEMO_VAES["2.5"], version=None)).version is None
    assert file_kind(write_conv_vae25(tmp_path / "conv25v.safetensors", DEMO_VAES["2.5"])).version == "2.5"


@pytest.mark.parametrize("version", ["2.0", "2.3"])
def test_a_vae_file_without_metadata_takes_the_release_its_shapes_have(version, tmp_path):
    """A header-only file of the released VAE's full-size shapes (no `config`, no `model_version`)."""
    config = VideoVaeConfig.from_metadata(RELEASED_VAE_SECTIONS[version])
    with torch.device("meta"):
        halves = {"decoder.": VideoDecoder(config), "encoder.": VideoEncoder(config)}
    shapes = {f"vae.{half}{name}": tuple(value.shape) for half, model in halves.items()
              for name, value in model.state_dict().items() if not name.startswith("per_channel_statistics.")}
    path = write_header_only(tmp_path / f"LTX{version}_video_vae_bf16.safetensors", shapes)
    assert file_kind(path) == FileKind("video VAE", version, "convolutional decoder")


def test_an_upsampler_s_release_is_told_by_its_resampler(tmp_path):
    """Of the released x2 upsamplers only LTX-2.0's is rational; 2.3's and 2.5's plain form names no release."""
    assert file_kind(write_upsampler(tmp_path / "up20.safetensors", "2.0")).version == "2.0"
    assert file_kind(write_upsampler(tmp_path / "up23.safetensors", "2.3")).version is None


def test_an_ltx_2_5_transformer_with_ltx_2_3_vae_files_is_refused(split, ltx25, tmp_path, capsys, no_model_work):
    transformer, text_encoder = ltx25
    video, audio = split["2.3"]
    code = main(["generate", "--checkpoint", str(transformer), "--text-encoder", str(text_encoder), "--vae",
                 str(video), "--audio-vae", str(audio), "--output", str(tmp_path / "x.mp4")])
    err = capsys.readouterr().err
    assert code == 2 and "different LTX-2 releases" in err
    assert f"--vae {video.name}: an LTX-2.3 video VAE (convolutional decoder)" in err
    assert f"--checkpoint {transformer.name}: an LTX-2.5 transformer" in err
    assert not (tmp_path / "x.mp4").exists()


def test_an_ltx_2_0_upsampler_in_an_ltx_2_3_two_stage_run_is_refused(tiny_checkpoints, gemma_files, tmp_path,
                                                                     capsys, no_model_work):
    flags = ["--checkpoint", str(tiny_checkpoints["2.3"]), "--text-encoder", str(gemma_files[0]), "--mode",
             "two-stage", "--distilled-lora", str(write_lora(tmp_path / "distilled.safetensors", 1, "2.3"))]
    code = main(["generate", *flags, "--upsampler", str(write_upsampler(tmp_path / "up20.safetensors", "2.0")),
                 "--output", str(tmp_path / "x.mp4")])
    err = capsys.readouterr().err
    assert code == 2 and "--upsampler up20.safetensors: an LTX-2.0 latent upsampler" in err
    ModelFiles(str(tiny_checkpoints["2.3"]), str(gemma_files[0]), str(write_upsampler(tmp_path / "up23.safetensors",
               "2.3")), str(tmp_path / "distilled.safetensors")).check("two-stage")


def test_a_split_2_0_audio_vae_beside_an_ltx_2_3_checkpoint_is_refused(tiny_checkpoints, gemma_files, split):
    files = ModelFiles(str(tiny_checkpoints["2.3"]), str(gemma_files[0]), audio_vae=str(split["2.0"][1]))
    with pytest.raises(CheckpointError, match="different LTX-2 releases.*an LTX-2.0 audio VAE"):
        files.check("one-stage")
    ModelFiles(str(tiny_checkpoints["2.3"]), str(gemma_files[0]), vae=str(split["2.3"][0]),
               audio_vae=str(split["2.3"][1])).check("one-stage")


def test_two_transformers_of_the_folders_release_are_a_choice_left_to_the_user(ltx25, tmp_path):
    """Both headers say LTX-2.5 dev; the "ltx-2.5" in one name does not pick it over the other."""
    transformer, text_encoder = ltx25
    shutil.copy(transformer, tmp_path / transformer.name)
    shutil.copy(transformer, tmp_path / "my-finetune-dev.safetensors")
    shutil.copy(text_encoder, tmp_path / text_encoder.name)
    with pytest.raises(CheckpointError, match=r"holds 2 files for the transformer .*my-finetune-dev.safetensors.*"
                                              r"pick one with --checkpoint PATH"):
        ModelFiles(str(tmp_path)).resolved()
