"""Loading the DiT from synthetic single-file checkpoints, and a clear error for every kind of bad file."""

from __future__ import annotations

import json
import pickle

import pytest
import torch
from safetensors.torch import save_file

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_inputs, demo_transformer
from ltx2_core.errors import (
    CheckpointError, ConfigError, CorruptCheckpointError, KeyMismatchError, MissingConfigError, NotSafetensorsError,
    ShapeMismatchError, UnknownModelVersionError,
)
from ltx2_core.loader import load_transformer, read_header
from support.checkpoints import checkpoint_metadata, write_checkpoint

PREFIX = "model.diffusion_model."


@pytest.fixture(scope="module", params=["2.0", "2.3"])
def bundle(request, tmp_path_factory):
    config = TransformerConfig.tiny(request.param)
    model = demo_transformer(config, seed=7)
    path = write_checkpoint(tmp_path_factory.mktemp("ckpt") / f"ltx-{request.param}-tiny.safetensors",
                            model.state_dict(), config)
    return model, path


def _state(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_loaded_model_equals_in_memory_model(bundle):
    model, path = bundle
    loaded = load_transformer(path)
    assert loaded.config == model.config
    file = read_header(path)
    assert any(k.startswith(PREFIX + "video_embeddings_connector.") for k in file.tensors)  # left for its own loader
    assert any(k.startswith("vae.") for k in file.tensors) and any(k.startswith("vocoder.") for k in file.tensors)
    video, audio, run = demo_inputs(model)
    want = model(video, audio, run)
    video2, audio2, run2 = demo_inputs(loaded)
    got = loaded(video2, audio2, run2)
    for name, value in loaded.state_dict().items():
        assert torch.equal(value, model.state_dict()[name]), name  # the file holds a copy of the weights
    # the same weights, but memory-mapped ones need not be 64-byte aligned and the CPU GEMM may then take another
    # kernel path (1.4e-6 apart on one AMD EPYC): the outputs agree to fp32 rounding, not bit for bit
    torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[1], want[1], atol=1e-5, rtol=1e-5)


def test_load_casts_to_requested_dtype(bundle):
    _, path = bundle
    loaded = load_transformer(path, dtype=torch.bfloat16)
    assert {p.dtype for p in loaded.parameters()} == {torch.bfloat16}
    assert not any(p.is_meta for p in loaded.parameters())


def test_explicit_config_replaces_missing_metadata(bundle, tmp_path):
    model, _ = bundle
    path = write_checkpoint(tmp_path / "bare.safetensors", _state(model), model.config, metadata={})
    with pytest.raises(MissingConfigError, match="bare.safetensors.*no 'config' metadata.*explicit config"):
        load_transformer(path)
    assert load_transformer(path, config=model.config).config == model.config


def test_pickle_renamed_to_safetensors(tmp_path):
    zipped = tmp_path / "model.safetensors"
    torch.save({"weight": torch.zeros(2)}, zipped)
    with pytest.raises(NotSafetensorsError, match="zip archive.*never pickles"):
        load_transformer(zipped)
    raw = tmp_path / "raw.safetensors"
    raw.write_bytes(pickle.dumps({"weight": [0.0]}, protocol=4))
    with pytest.raises(NotSafetensorsError, match="Python pickle.*never pickles"):
        load_transformer(raw)
    text = tmp_path / "text.safetensors"
    text.write_bytes(b"this is not a model file at all")
    with pytest.raises(NotSafetensorsError, match="not a safetensors file"):
        load_transformer(text)


def test_truncated_file(bundle, tmp_path):
    _, path = bundle
    data = path.read_bytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(data[: len(data) - 100])
    with pytest.raises(CorruptCheckpointError, match="cut.safetensors.*truncated"):
        load_transformer(cut)
    stub = tmp_path / "stub.safetensors"
    stub.write_bytes(data[:4])
    with pytest.raises(CorruptCheckpointError, match="too short"):
        load_transformer(stub)
    header_cut = tmp_path / "header_cut.safetensors"
    header_cut.write_bytes(data[:200])
    with pytest.raises(CorruptCheckpointError, match="header claims .* truncated"):
        load_transformer(header_cut)


def test_corrupt_header(bundle, tmp_path):
    _, path = bundle
    data = bytearray(path.read_bytes())
    data[20:40] = b"\x00garbage}{][\x01\x02\x03 xx"
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(bytes(data))
    with pytest.raises(CorruptCheckpointError, match="bad.safetensors.*not valid JSON"):
        load_transformer(bad)


def _drop_one(state, config):
    del state["transformer_blocks.1.attn1.to_q.weight"]


def _add_one(state, config):
    state["transformer_blocks.0.attn1.extra.weight"] = torch.zeros(3)


def _reshape_one(state, config):
    state["proj_out.weight"] = torch.zeros(64, config.video.width)


@pytest.mark.parametrize(("edit", "error", "message"), [
    (_drop_one, KeyMismatchError, r"1 missing \(e\.g\. transformer_blocks\.1\.attn1\.to_q\.weight\)"),
    (_add_one, KeyMismatchError,
     r"1 unexpected \(e\.g\. model\.diffusion_model\.transformer_blocks\.0\.attn1\.extra\.weight\)"),
    (_reshape_one, ShapeMismatchError,
     r"'model\.diffusion_model\.proj_out\.weight' has shape \[64, 16\] but .* expects \[128, 16\]"),
], ids=["missing", "unexpected", "shape"])
def test_tensor_set_mismatch(bundle, tmp_path, edit, error, message):
    model, _ = bundle
    state = _state(model)
    edit(state, model.config)
    path = write_checkpoint(tmp_path / "edited.safetensors", state, model.config)
    with pytest.raises(error, match=message):
        load_transformer(path)


def test_unknown_model_version(bundle, tmp_path):
    model, _ = bundle
    metadata = checkpoint_metadata(model.config, "3.1.0")
    path = write_checkpoint(tmp_path / "future.safetensors", _state(model), model.config, metadata=metadata)
    with pytest.raises(UnknownModelVersionError, match="future.safetensors.*'3.1.0'"):
        load_transformer(path)


def test_unsupported_config_value_names_file_and_key(bundle, tmp_path):
    model, _ = bundle
    metadata = checkpoint_metadata(model.config, "2.0.0")
    sections = json.loads(metadata["config"])
    sections["transformer"]["rope_type"] = "spiral"
    path = write_checkpoint(tmp_path / "odd.safetensors", _state(model), model.config,
                            metadata={**metadata, "config": json.dumps(sections)})
    with pytest.raises(ConfigError, match="odd.safetensors.*rope_type='spiral'"):
        load_transformer(path)


def test_config_without_transformer_section(tmp_path):
    path = tmp_path / "vae_only.safetensors"
    save_file({"vae.decoder.conv_in.weight": torch.zeros(1)}, str(path), metadata={"config": json.dumps({"vae": {}})})
    with pytest.raises(MissingConfigError, match="no 'transformer' section"):
        load_transformer(path)


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        load_transformer(tmp_path / "nowhere.safetensors")


def test_reads_only_the_transformer_tensors_and_never_unpickles(bundle, monkeypatch):
    model, path = bundle
    import pickle as pickle_module

    import safetensors

    read: list[str] = []
    real_open = safetensors.safe_open

    class RecordingOpen:
        def __init__(self, *args, **kwargs):
            self._inner = real_open(*args, **kwargs)

        def __enter__(self):
            self._file = self._inner.__enter__()
            return self

        def __exit__(self, *exc):
            return self._inner.__exit__(*exc)

        def get_tensor(self, name):
            read.append(name)
            return self._file.get_tensor(name)

    def no_unpickling(*args, **kwargs):
        raise AssertionError("a checkpoint loader must never unpickle")

    monkeypatch.setattr("ltx2_core.loader.safetensors_file.safe_open", RecordingOpen)
    monkeypatch.setattr(pickle_module, "Unpickler", no_unpickling)
    monkeypatch.setattr(torch, "load", no_unpickling)
    load_transformer(path)
    assert sorted(read) == sorted(PREFIX + k for k in model.state_dict())
