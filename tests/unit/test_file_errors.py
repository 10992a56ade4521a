"""Errors that name the real fault: a damaged header length, the transformer in another layout, a directory."""

from __future__ import annotations

import struct

import pytest
import torch
from safetensors.torch import save_file

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_transformer
from ltx2_core.errors import (
    CheckpointError, CorruptCheckpointError, KeyMismatchError, MissingConfigError, UnsupportedLayoutError,
)
from ltx2_core.loader import (
    load_lora, load_transformer, load_upsampler, load_video_decoder, read_header, transformer_config,
)
from ltx2_core.loader.gemma_files import find_gemma
from ltx2_core.loader.safetensors_file import MAX_HEADER_BYTES
from ltx2_core.loader.text_weights import load_prompt_encoder
from support.checkpoints import MODEL_VERSIONS, checkpoint_metadata, other_components, write_checkpoint
from support.diffusers import diffusers_name

OFFICIAL = "model.diffusion_model."


@pytest.fixture(scope="module", params=["2.0", "2.3"])
def model(request):
    return demo_transformer(TransformerConfig.tiny(request.param), seed=3)


def _state(model, prefix=""):
    return {prefix + k: v.contiguous() for k, v in model.state_dict().items()}


def _header_file(path, claimed: int, size: int):
    """A file whose 8-byte length field claims `claimed` bytes, then a '{', padded to `size` bytes."""
    path.write_bytes(struct.pack("<Q", claimed) + b'{"w": {}}'.ljust(size - 8, b" "))
    return path


@pytest.mark.parametrize("claimed", [10**12, 2**40])
def test_header_length_beyond_the_file_is_a_truncated_download(tmp_path, claimed):
    path = _header_file(tmp_path / "cut.safetensors", claimed, 91)
    with pytest.raises(CorruptCheckpointError, match=f"cut.safetensors.*claims {claimed} bytes but the file has only "
                                                     "91 bytes.*truncated.*download it again") as caught:
        load_transformer(path)
    assert "pickle" not in str(caught.value)


def test_header_length_over_the_limit_inside_the_file_is_damaged(tmp_path):
    path = tmp_path / "huge.safetensors"
    with path.open("wb") as f:
        f.write(struct.pack("<Q", MAX_HEADER_BYTES + 1) + b"{")
        f.truncate(8 + MAX_HEADER_BYTES + 64)  # sparse: no disk space used
    with pytest.raises(CorruptCheckpointError, match=f"claims {MAX_HEADER_BYTES + 1} bytes, implausibly large.*"
                                                     "damaged") as caught:
        load_transformer(path)
    assert "pickle" not in str(caught.value)


def test_header_length_too_small_for_json_is_damaged(tmp_path):
    path = _header_file(tmp_path / "tiny.safetensors", 1, 40)
    with pytest.raises(CorruptCheckpointError, match="claims 1 bytes, too few.*damaged"):
        load_transformer(path)


def _connectors(version, prefix):
    """The text connectors a ComfyUI diffusion model also holds, under `prefix` instead of the official one."""
    return {prefix + k[len(OFFICIAL):]: v for k, v in other_components(version).items() if k.startswith(OFFICIAL)}


@pytest.mark.parametrize("prefix", ["", "diffusion_model."], ids=["bare", "diffusion_model"])
def test_transformer_only_export_with_config_loads(model, tmp_path, prefix):
    path = tmp_path / "export.safetensors"
    tensors = _state(model, prefix) | _connectors(model.config.version, prefix)
    save_file(tensors, str(path), metadata=checkpoint_metadata(model.config, MODEL_VERSIONS[model.config.version]))
    loaded = load_transformer(path)
    assert loaded.config == model.config
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name  # the file holds a copy of the weights


@pytest.mark.parametrize(("prefix", "layout"), [
    ("", "with no prefix"),
    ("diffusion_model.", "under 'diffusion_model.'"),
], ids=["bare", "diffusion_model"])
def test_transformer_only_export_without_config_names_its_layout(model, tmp_path, prefix, layout):
    path = tmp_path / "export.safetensors"
    save_file(_state(model, prefix), str(path))
    with pytest.raises(MissingConfigError, match=f"export.safetensors: a transformer-only file \\(official LTX-2 names "
                                                 f"{layout}.*full single-file checkpoint.*ltx-2-19b-dev.safetensors.*"
                                                 "explicit config"):
        load_transformer(path)
    assert load_transformer(path, config=model.config).config == model.config


@pytest.mark.parametrize("part", ["whole", "one_shard"])
def test_diffusers_transformer_is_named_with_the_file_to_use(model, tmp_path, part):
    state = {diffusers_name(k): v for k, v in _state(model).items()}
    assert {"proj_in.weight", "time_embed.linear.weight", "transformer_blocks.0.attn1.norm_q.weight"} <= set(state)
    if part == "one_shard":  # a later shard of diffusers' sharded transformer holds only blocks
        state = {k: v for k, v in state.items() if k.startswith("transformer_blocks.1.")}
    path = tmp_path / "diffusion_pytorch_model.safetensors"
    save_file(state, str(path), metadata={"format": "pt"})  # what diffusers writes: no 'config'
    message = r"diffusers-format LTX-2 transformer \(LTX2VideoTransformer3DModel.*official single-file checkpoint"
    for load in (load_transformer, lambda p: load_transformer(p, config=model.config),
                 lambda p: transformer_config(read_header(p))):
        with pytest.raises(UnsupportedLayoutError, match=message) as caught:
            load(path)
        assert isinstance(caught.value, KeyMismatchError) and "missing" not in str(caught.value)


def test_comfyui_saved_checkpoint_names_comfyui(model, tmp_path):
    path = tmp_path / "ComfyUI_00001_.safetensors"
    # CheckpointSave writes the text encoder under 'text_encoders.', the prompt and workflow as metadata
    tensors = _state(model, OFFICIAL) | {"text_encoders.norm.weight": torch.ones(4)}
    save_file(tensors, str(path), metadata={"prompt": "{}", "workflow": "{}"})
    with pytest.raises(MissingConfigError, match="ComfyUI_00001_.safetensors: saved by ComfyUI.*'config' metadata.*"
                                                 "ltx-2-19b-dev.safetensors.*explicit config"):
        load_transformer(path)
    assert load_transformer(path, config=model.config).config == model.config


def test_vae_from_a_transformer_only_file_names_the_full_checkpoint(model, tmp_path):
    path = write_checkpoint(tmp_path / "dit_only.safetensors", _state(model), model.config,
                            with_other_components=False)
    with pytest.raises(KeyMismatchError, match="dit_only.safetensors: no video VAE decoder tensors.*'vae.decoder.'.*"
                                               "full LTX-2 checkpoint") as caught:
        load_video_decoder(path)
    assert "missing" not in str(caught.value)


def _folder(tmp_path, *files):
    folder = tmp_path / "models"
    folder.mkdir()
    for name in files:
        save_file({"w": torch.zeros(1)}, str(folder / name))
    return folder


def test_checkpoint_directory(tmp_path):
    folder = _folder(tmp_path, "ltx-2-19b-dev.safetensors")
    with pytest.raises(CheckpointError, match="checkpoint .*models is a directory, not a .safetensors file "
                                              r"\(it holds ltx-2-19b-dev.safetensors\); pass the .safetensors file"):
        load_transformer(folder)


def test_lora_directory(tmp_path):
    with pytest.raises(CheckpointError, match="LoRA .*models is a directory, not a .safetensors file"):
        load_lora(_folder(tmp_path))
    with pytest.raises(CheckpointError, match="LoRA not found"):
        load_lora(tmp_path / "nowhere.safetensors")


def test_upsampler_directory(tmp_path):
    with pytest.raises(CheckpointError, match="latent upsampler .*models is a directory, not a .safetensors file"):
        load_upsampler(_folder(tmp_path))


def test_text_encoder_directory_that_is_not_a_hugging_face_folder(tmp_path):
    folder = _folder(tmp_path, "gemma_3_12B_it.safetensors")
    message = (r"text encoder .*models is a directory without config.json \(it holds gemma_3_12B_it.safetensors\), "
               "so not a Hugging Face Gemma 3 folder; pass ComfyUI's single file gemma_3_12B_it.*google/gemma-3-12b-it")
    with pytest.raises(CheckpointError, match=message):
        find_gemma(folder)
    with pytest.raises(CheckpointError, match=message):
        load_prompt_encoder(folder, tmp_path / "checkpoint.safetensors")
