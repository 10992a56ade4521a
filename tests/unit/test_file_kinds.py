"""Each LTX-2 file kind (the 2.0/2.3 bundle and the seven LTX-2.5 component files) is told from its header, and a
file picked for the wrong kind, or files of two releases, are refused with a message naming what each is and where
it belongs. Headers are written as the released files carry them (key prefixes, `config` sections, `model_version`,
`gemma_config`), with tiny tensors."""

import json

import pytest
import torch
from safetensors.torch import save_file

from ltx2_core.errors import CheckpointError
from ltx2_core.loader.file_kinds import FileKind, check_file_kind, check_same_release, file_kind



def _write(path, tensors, **metadata):
    save_file({name: torch.zeros(1) for name in tensors}, str(path),
              metadata={k: v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()})
    return path


FILES = {
    "ltx-2.3-22b-dev.safetensors": (
        ["model.diffusion_model.transformer_blocks.0.attn1.to_q.weight", "vae.decoder.conv_in.conv.weight",
         "audio_vae.decoder.conv_in.conv.weight", "vocoder.conv_pre.weight"],
        {"config": {"transformer": {}, "vae": {"_class_name": "CausalVideoAutoencoder"}, "audio_vae": {},
                    "vocoder": {}}, "model_version": "2.3.0"},
        FileKind("checkpoint", "2.3")),
    "ltx-2.5-22b-dev-transformer-bf16.safetensors": (
        ["model.diffusion_model.transformer_blocks.0.attn1.to_q.weight",
         "model.diffusion_model.video_embeddings_connector.transformer_1d_blocks.0.attn1.to_q.weight"],
        {"config": {"transformer": {"ff_bias": False}}, "model_version": "2.5.0",
         "gemma_source_checkpoint": {"gemma_version": "gemma4-12b-ltx-v1"}},
        FileKind("transformer", "2.5")),
    "gemma4-12b-with-proj-ltx-2.5-bf16.safetensors": (
        ["model.layers.0.post_feedforward_layernorm.weight", "tokenizer_json",
         "text_embedding_projection.video_aggregate_embed.weight"],
        {"gemma_config": {"model_type": "gemma4_unified", "gemma_version": "gemma4-12b-ltx-v1"}},
        FileKind("text encoder", "2.5", "Gemma (gemma4_unified)")),
    "gemma_3_12B_it.safetensors": (
        ["model.layers.0.mlp.up_proj.weight", "model.embed_tokens.weight", "spiece_model"], {},
        FileKind("text encoder", None, "Gemma 3")),
    "ltx-2.5-video-vae-bf16.safetensors": (
        ["decoder.stages.0.attn.qkv.weight", "per_channel_statistics.mean-of-means"],
        {"config": {"vae": {"_class_name": "DiffusionVideoDecoder"}}},
        FileKind("video VAE", "2.5", "diffusion decoder")),
    "ltx-2.5-video-vae-conv-bf16.safetensors": (
        ["decoder.conv_in.conv.weight", "encoder.conv_in.conv.weight"],
        {"config": {"vae": {"_class_name": "CausalVideoAutoencoder"}}, "model_version": "2.5.0"},
        FileKind("video VAE", "2.5", "convolutional decoder")),
    "ltx-2.5-audio-vae-bf16.safetensors": (
        ["audio_vae.decoder.conv_in.conv.weight", "vocoder.vocoder.conv_pre.weight"],
        {"config": {"audio_vae": {}, "vocoder": {}}},
        FileKind("audio VAE")),
    "ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors": (
        ["initial_conv.weight"], {"config": {"in_channels": 128, "mid_channels": 1024, "spatial_upsample": True}},
        FileKind("latent upsampler")),
    "ltx-2.5-22b-distilled-lora-450-bf16.safetensors": (
        ["diffusion_model.transformer_blocks.0.attn1.to_q.lora_A.weight",
         "diffusion_model.transformer_blocks.0.attn1.to_q.lora_B.weight"], {},
        FileKind("LoRA")),
}


@pytest.fixture
def files(tmp_path):
    return {name: _write(tmp_path / name, tensors, **metadata) for name, (tensors, metadata, _) in FILES.items()}


def test_every_kind_is_told_from_its_header(files):
    for name, path in files.items():
        assert file_kind(path) == FILES[name][2], name


@pytest.mark.parametrize("name, asked, says", [
    ("ltx-2.5-video-vae-bf16.safetensors", "transformer",
     "an LTX-2.5 video VAE (diffusion decoder), not an LTX-2 transformer; it belongs in the vae folder"),
    ("ltx-2.5-audio-vae-bf16.safetensors", "video VAE", "an LTX-2 audio VAE, not an LTX-2 video VAE"),
    ("gemma4-12b-with-proj-ltx-2.5-bf16.safetensors", "transformer", "belongs in the text_encoders folder"),
    ("ltx-2.5-22b-dev-transformer-bf16.safetensors", "text encoder", "belongs in the diffusion_models folder"),
    ("ltx-2.5-22b-distilled-lora-450-bf16.safetensors", "latent upsampler", "an LTX-2 LoRA"),
    ("ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors", "LoRA", "latent_upscale_models folder"),
    ("ltx-2.3-22b-dev.safetensors", "audio VAE", "an LTX-2.3 checkpoint"),
])
def test_a_file_of_the_wrong_kind_is_refused_naming_what_it_is(files, name, asked, says):
    with pytest.raises(CheckpointError) as info:
        check_file_kind(files[name], asked, loader="LTX2 Model Loader")
    message = str(info.value)
    assert says in message and name in message and "LTX2 Model Loader" in message


def test_the_right_kind_passes_and_a_bundle_serves_as_a_transformer(files):
    assert check_file_kind(files["ltx-2.5-video-vae-bf16.safetensors"], "video VAE").detail == "diffusion decoder"
    assert check_file_kind(files["ltx-2.3-22b-dev.safetensors"], "transformer").kind == "checkpoint"


def test_files_of_two_releases_are_refused_together(files):
    kinds = {name: file_kind(files[name]) for name in
             ("ltx-2.3-22b-dev.safetensors", "gemma4-12b-with-proj-ltx-2.5-bf16.safetensors")}
    with pytest.raises(CheckpointError, match="different LTX-2 releases") as info:
        check_same_release(kinds)
    assert "LTX-2.3 checkpoint" in str(info.value) and "LTX-2.5 text encoder" in str(info.value)
    release = check_same_release({name: file_kind(files[name]) for name in FILES if "2.5" in name})
    assert release == "2.5"
    assert check_same_release({"gemma": file_kind(files["gemma_3_12B_it.safetensors"])}) is None


def test_a_file_of_no_kind_and_a_pickle_are_named(tmp_path):
    other = _write(tmp_path / "other.safetensors", ["weight"])
    assert file_kind(other).kind == "unknown"
    with pytest.raises(CheckpointError, match="no LTX-2 kind"):
        check_file_kind(other, "video VAE")
    pickle = tmp_path / "model.ckpt"
    pickle.write_bytes(b"\x80\x02}q\x00.")
    with pytest.raises(CheckpointError):
        file_kind(pickle)


def test_the_command_line_refuses_a_mixed_pair_before_model_work(files, capsys):
    """An LTX-2.3 checkpoint with the LTX-2.5 text encoder: exit 2 at the files' check, naming both."""
    from ltx2_core.__main__ import main

    code = main(["generate", "--checkpoint", str(files["ltx-2.3-22b-dev.safetensors"]), "--text-encoder",
                 str(files["gemma4-12b-with-proj-ltx-2.5-bf16.safetensors"]), "--prompt", "a cat",
                 "--output", str(files["ltx-2.3-22b-dev.safetensors"].parent / "out.mp4")])
    err = capsys.readouterr().err
    assert code == 2 and "different LTX-2 releases" in err
    assert "--checkpoint ltx-2.3-22b-dev.safetensors: an LTX-2.3 checkpoint" in err
    assert "--text-encoder gemma4-12b-with-proj-ltx-2.5-bf16.safetensors: an LTX-2.5 text encoder" in err
    assert not (files["ltx-2.3-22b-dev.safetensors"].parent / "out.mp4").exists()
