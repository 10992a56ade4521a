"""Bad LTX-2.5 text encoder files and mismatched pairs, each refused with its own message from the headers, before
any tensor is read: no `gemma_config`, no `tokenizer_json`, a Gemma 4 text encoder with an LTX-2.3 bundle, a
Gemma 3 text encoder with an LTX-2.5 transformer, and a Gemma 4 of another `gemma_version`."""

from __future__ import annotations

import json

import pytest

from ltx2_core.errors import CheckpointError
from ltx2_core.loader import gemma_files, text_weights
from ltx2_core.loader.text_weights import load_prompt_encoder
from support.gemma4 import FILE_NAME, gemma4_config, sources25, write_gemma4_file, write_transformer25_file


@pytest.fixture(scope="module")
def transformer(tmp_path_factory):
    return write_transformer25_file(tmp_path_factory.mktemp("ltx25") / "transformer.safetensors")


@pytest.fixture
def no_reads(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a tensor was read before the files were checked")

    for module in (gemma_files, text_weights):
        monkeypatch.setattr(module, "read_tensors", refuse)


def _load(text_encoder, checkpoint):
    return load_prompt_encoder(text_encoder, checkpoint, max_length=32)


def test_a_text_encoder_without_gemma_config_is_refused(tmp_path, transformer, no_reads):
    stripped = write_gemma4_file(tmp_path / FILE_NAME, metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="without its 'gemma_config' metadata"):
        _load(stripped, sources25(stripped, transformer))
    bare = write_gemma4_file(tmp_path / "bare.safetensors", metadata={"format": "pt"}, drop=("tokenizer_json",))
    with pytest.raises(CheckpointError, match="Gemma 4 text encoder without the 'gemma_config' metadata"):
        _load(bare, sources25(bare, transformer))
    broken = write_gemma4_file(tmp_path / "broken.safetensors", metadata={"format": "pt", "gemma_config": "{"})
    with pytest.raises(CheckpointError, match="'gemma_config' metadata is not valid JSON"):
        _load(broken, sources25(broken, transformer))


def test_a_text_encoder_without_tokenizer_json_is_refused(tmp_path, transformer, no_reads):
    path = write_gemma4_file(tmp_path / FILE_NAME, drop=("tokenizer_json",))
    with pytest.raises(CheckpointError, match="no embedded tokenizer .*'tokenizer_json'"):
        _load(path, sources25(path, transformer))
    path = write_gemma4_file(tmp_path / "no_config.safetensors", drop=("hf_asset__tokenizer_config.json",))
    with pytest.raises(CheckpointError, match="no embedded tokenizer_config.json"):
        _load(path, sources25(path, transformer))


def test_a_gemma4_text_encoder_with_an_ltx23_bundle_is_refused(tmp_path, tiny_checkpoints, no_reads):
    path = write_gemma4_file(tmp_path / FILE_NAME)
    with pytest.raises(CheckpointError, match=r"LTX-2.3 model .* trained with Gemma 3 12B, but text encoder .*"
                                              r"gemma4-12b.* is Gemma 4 .*pick gemma_3_12B_it"):
        _load(path, tiny_checkpoints["2.3"])


def test_a_gemma3_text_encoder_with_an_ltx25_transformer_is_refused(gemma_files, transformer, no_reads):
    comfy_file, _ = gemma_files
    with pytest.raises(CheckpointError, match=r"Gemma version mismatch: the LTX-2.5 transformer .*transformer"
                                              r"\.safetensors .*'gemma4-12b-ltx-v1', but text encoder .*gemma_3_12B_it"
                                              r".* is Gemma 3 .*gemma4-12b-with-proj-ltx-2.5-bf16"):
        _load(comfy_file, sources25(comfy_file, transformer))


def test_a_gemma4_of_another_version_is_refused(tmp_path, transformer, no_reads):
    path = write_gemma4_file(tmp_path / FILE_NAME, config=gemma4_config(gemma_version="gemma4-12b-ltx-v0"))
    with pytest.raises(CheckpointError, match="'gemma4-12b-ltx-v1', but text encoder .* has gemma_version="
                                              "'gemma4-12b-ltx-v0'"):
        _load(path, sources25(path, transformer))


def test_another_model_family_in_gemma_config_is_refused(tmp_path, transformer, no_reads):
    path = write_gemma4_file(tmp_path / FILE_NAME, metadata={
        "format": "pt", "gemma_config": json.dumps({"model_type": "llama", "gemma_version": "x"})})
    with pytest.raises(CheckpointError, match="model_type 'llama', not Gemma 3 or Gemma 4"):
        _load(path, sources25(path, transformer))
    path = write_gemma4_file(tmp_path / "relu.safetensors", config=gemma4_config(hidden_activation="relu"))
    with pytest.raises(CheckpointError, match="unsupported Gemma 4 config: hidden_activation='relu'"):
        _load(path, sources25(path, transformer))
