"""Bad text-encoder inputs fail early, with a message naming the file and the reason, before weights are read."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_transformer
from ltx2_core.errors import CheckpointError, KeyMismatchError, NotSafetensorsError
from ltx2_core.loader import gemma_files as gemma_loader
from ltx2_core.loader import text_weights
from ltx2_core.loader.text_weights import load_prompt_encoder
from ltx2_core.quant.fp8 import dequantize, fp8_modules, quantize
from ltx2_core.quant.nvfp4 import blocked_index, dequantize_nvfp4
from support.checkpoints import write_checkpoint
from support.gemma import gemma_state, write_comfyui_file
from support.nvfp4 import quantize_nvfp4


@pytest.fixture
def no_weight_reads(monkeypatch):
    """Every failure below must happen on headers alone."""
    def refuse(*args, **kwargs):
        raise AssertionError("tensors were read before the inputs were validated")

    monkeypatch.setattr(gemma_loader, "read_tensors", refuse)
    monkeypatch.setattr(text_weights, "read_tensors", refuse)


def _comfy(tmp_path, name="gemma.safetensors", drop=(), dtype=torch.float32, **kwargs):
    state = {k: v for k, v in gemma_state(**kwargs).items() if not any(k.startswith(d) or k.endswith(d) for d in drop)}
    return write_comfyui_file(tmp_path / name, state, dtype=dtype)


def test_gemma_of_another_size_is_rejected_naming_both_files(tmp_path, tiny_checkpoints, no_weight_reads):
    wide = _comfy(tmp_path, "gemma_3_4b_it.safetensors", hidden_size=48)
    with pytest.raises(CheckpointError) as error:
        load_prompt_encoder(wide, tiny_checkpoints["2.0"], max_length=32)
    message = str(error.value)
    assert str(wide) in message and str(tiny_checkpoints["2.0"]) in message
    assert "hidden size 48 × 3 hidden states gives 144 features" in message and "takes 96" in message


@pytest.mark.parametrize("tensors, reason", [
    ({"model.diffusion_model.patchify_proj.weight": torch.zeros(2, 2)}, "this is an LTX-2 model checkpoint"),
    ({"shared.weight": torch.zeros(2, 2), "encoder.block.0.layer.0.SelfAttention.q.weight": torch.zeros(2, 2)},
     "looks like a T5 encoder"),
    ({"text_model.embeddings.token_embedding.weight": torch.zeros(2, 2)}, "looks like a CLIP text encoder"),
], ids=["ltx-checkpoint", "t5", "clip"])
def test_other_families_are_named(tmp_path, tiny_checkpoints, no_weight_reads, tensors, reason):
    path = tmp_path / "text_encoder.safetensors"
    save_file(tensors, str(path))
    with pytest.raises(CheckpointError, match=reason) as error:
        load_prompt_encoder(path, tiny_checkpoints["2.3"])
    assert str(path) in str(error.value) and "not a Gemma 3 text encoder" in str(error.value)


def test_gemma_without_gemma3_norms_is_rejected(tmp_path, tiny_checkpoints, no_weight_reads):
    path = _comfy(tmp_path, drop=("q_norm.weight", "k_norm.weight"))
    with pytest.raises(CheckpointError, match="Gemma 1/2 or Llama"):
        load_prompt_encoder(path, tiny_checkpoints["2.3"], max_length=32)


def test_missing_tensor_is_named(tmp_path, no_weight_reads):
    path = _comfy(tmp_path, drop=("layers.1.mlp.up_proj.weight",))
    with pytest.raises(KeyMismatchError, match=r"1 missing \(e.g. layers.1.mlp.up_proj.weight\)") as error:
        gemma_loader.load_gemma(gemma_loader.find_gemma(path))
    assert str(path) in str(error.value)


def test_gemma_cast_to_fp8_wholesale_is_rejected_naming_the_layer(tmp_path, tiny_checkpoints):
    """Embeddings and norms in fp8 are no fp8 file ComfyUI or Google publish."""
    path = _comfy(tmp_path, "gemma_3_12B_it_fp8.safetensors", dtype=torch.float8_e4m3fn)
    with pytest.raises(CheckpointError, match="is float8_e4m3fn but .* is not a linear layer"):
        load_prompt_encoder(path, tiny_checkpoints["2.3"], max_length=32)


@pytest.mark.parametrize("layout", ["comfy_quant", "scaled_fp8"])
def test_comfyuis_fp8_scaled_gemma_stays_fp8_and_encodes_as_its_dequantised_weights(tmp_path, tiny_checkpoints,
                                                                                   layout):
    """ComfyUI's gemma_3_12B_it_fp8_scaled layout (per-layer comfy_quant, or the older root `scaled_fp8` marker
    with `scale_weight`): the linears stay fp8 (half the memory) and are dequantised one layer at a time."""
    state = gemma_state()
    linears = [k for k in state if k.endswith(("_proj.weight",)) and k.startswith("layers.")]
    quantised, dequantised = {}, dict(state)
    for key in linears:
        q, scale = quantize(state[key])
        quantised[key], dequantised[key] = (q, scale), dequantize(q, scale, torch.float32)
    reference = write_comfyui_file(tmp_path / "reference.safetensors", dequantised)
    path = write_comfyui_file(tmp_path / "gemma_3_12B_it_fp8_scaled.safetensors", state)
    with safe_open(str(path), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    for key, (q, scale) in quantised.items():
        stem = "model." + key[: -len(".weight")]
        tensors[stem + ".weight"] = q
        if layout == "comfy_quant":
            tensors[stem + ".weight_scale"] = scale
            tensors[stem + ".comfy_quant"] = torch.tensor(list(b'{"format": "float8_e4m3fn"}'), dtype=torch.uint8)
        else:
            tensors[stem + ".scale_weight"] = scale
    if layout == "scaled_fp8":
        tensors["scaled_fp8"] = torch.empty(0, dtype=torch.float8_e4m3fn)
    save_file(tensors, str(path))
    encoder = load_prompt_encoder(path, tiny_checkpoints["2.3"], max_length=32)
    fp8 = fp8_modules(encoder.gemma)
    assert len(fp8) == len(linears) and all(m.weight.dtype == torch.float8_e4m3fn for m in fp8.values())
    got = encoder.encode("a red car in the rain")[0]
    want = load_prompt_encoder(reference, tiny_checkpoints["2.3"], max_length=32).encode("a red car in the rain")[0]
    torch.testing.assert_close(got.video, want.video, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got.audio, want.audio, atol=1e-5, rtol=1e-5)


def test_comfyuis_fp4_mixed_gemma_dequantises_each_layer_and_encodes_as_its_weights(tmp_path, tiny_checkpoints):
    """gemma_3_12B_it_fp4_mixed: NVFP4 layers (comfy_quant "nvfp4": packed E2M1 pairs, blocked e4m3 block scales,
    an fp32 tensor scale) beside fp8 ones; each stays packed and is dequantised per call."""
    state = gemma_state()
    linears = sorted(k for k in state if k.endswith("_proj.weight") and k.startswith("layers."))
    dequantised, tensors = dict(state), {}
    for index, key in enumerate(linears):
        stem = "model." + key[: -len(".weight")]
        if index % 2 == 0:
            packed, blocked, tensor_scale = quantize_nvfp4(state[key])
            tensors |= {stem + ".weight": packed, stem + ".weight_scale": blocked,
                        stem + ".weight_scale_2": tensor_scale, stem + ".comfy_quant": _marker("nvfp4")}
            dequantised[key] = dequantize_nvfp4(packed, blocked, tensor_scale, *state[key].shape, torch.float32)
        else:
            q, scale = quantize(state[key])
            tensors |= {stem + ".weight": q, stem + ".weight_scale": scale, stem + ".comfy_quant": _marker(
                "float8_e4m3fn")}
            dequantised[key] = dequantize(q, scale, torch.float32)
    reference = write_comfyui_file(tmp_path / "reference.safetensors", dequantised)
    path = write_comfyui_file(tmp_path / "gemma_3_12B_it_fp4_mixed.safetensors", state)
    with safe_open(str(path), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()} | tensors
    save_file(tensors, str(path))
    encoder = load_prompt_encoder(path, tiny_checkpoints["2.3"], max_length=32)
    kinds = {type(m).__name__ for m in encoder.gemma.modules()}
    assert {"NVFP4Linear", "FP8Linear"} <= kinds
    got = encoder.encode("a red car in the rain")[0]
    want = load_prompt_encoder(reference, tiny_checkpoints["2.3"], max_length=32).encode("a red car in the rain")[0]
    torch.testing.assert_close(got.video, want.video, atol=1e-5, rtol=1e-5)
    assert (dequantised[linears[0]] - state[linears[0]]).abs().max() < 0.25 * state[linears[0]].abs().max()


def test_the_blocked_scale_layout_is_cublass():
    """Row r, block column c of a 128×4 tile at byte (r mod 32)·16 + (r div 32)·4 + c; tiles row-major."""
    index = blocked_index(256, 8)
    assert index[33, 1] == 16 + 4 + 1 and index[130, 5] == 3 * 512 + 2 * 16 + 1 and index[127, 3] == 31 * 16 + 15


def _marker(fmt: str) -> torch.Tensor:
    return torch.tensor(list(json.dumps({"format": fmt}).encode()), dtype=torch.uint8)


def test_other_text_encoder_quantisations_are_refused_naming_what_loads(tmp_path, tiny_checkpoints):
    path = write_comfyui_file(tmp_path / "gemma_3_12B_it_mxfp8.safetensors")
    with safe_open(str(path), framework="pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    tensors["model.layers.0.mlp.up_proj.comfy_quant"] = _marker("mxfp8")
    save_file(tensors, str(path))
    with pytest.raises(CheckpointError, match="quantised as mxfp8.*float8_e4m3fn"):
        load_prompt_encoder(path, tiny_checkpoints["2.3"], max_length=32)


def test_file_without_embedded_tokenizer_names_the_fix(tmp_path, tiny_checkpoints):
    path = write_comfyui_file(tmp_path / "gemma.safetensors", with_tokenizer=False)
    with pytest.raises(CheckpointError, match="no embedded tokenizer \\('spiece_model'\\)"):
        load_prompt_encoder(path, tiny_checkpoints["2.3"], max_length=32)


def test_checkpoint_without_text_projection_is_rejected(tmp_path, gemma_files, no_weight_reads):
    config = TransformerConfig.tiny("2.0")
    bare = write_checkpoint(tmp_path / "dit-only.safetensors", demo_transformer(config).state_dict(), config,
                            with_other_components=False)
    with pytest.raises(CheckpointError, match="no text projection"):
        load_prompt_encoder(gemma_files[0], bare, max_length=32)


def test_hf_folders_need_safetensors_and_gemma3(tmp_path, tiny_checkpoints):
    folder = tmp_path / "pickled"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gemma3", "text_config": {}}))
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04")
    with pytest.raises(NotSafetensorsError, match="pytorch_model.bin.*never pickles"):
        load_prompt_encoder(folder, tiny_checkpoints["2.0"])
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(CheckpointError, match="model_type 'llama' is not Gemma 3"):
        load_prompt_encoder(folder, tiny_checkpoints["2.0"])
