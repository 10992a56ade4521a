"""Test-wide settings: deterministic, single-threaded-friendly CPU runs without autograd."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _no_grad_and_seed():
    torch.manual_seed(0)
    with torch.no_grad():
        yield


@pytest.fixture
def one_thread():
    """Tiny convolutions are dominated by thread hand-offs: one thread is several times faster on 2 cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def gemma_files(tmp_path_factory):
    """A tiny Gemma 3 in both layouts: (ComfyUI single file, Hugging Face folder), same weights and tokenizer."""
    from support.gemma import write_comfyui_file, write_hf_folder

    root = tmp_path_factory.mktemp("text_encoders")
    return write_comfyui_file(root / "gemma_3_12B_it.safetensors"), write_hf_folder(root / "gemma-3-12b-it")


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory):
    """Tiny single-file LTX-2.0 and LTX-2.3 bundles, by version string."""
    from ltx2_core import TransformerConfig
    from ltx2_core.demo import demo_transformer
    from support.checkpoints import write_checkpoint

    root = tmp_path_factory.mktemp("checkpoints")
    paths = {}
    for version in ("2.0", "2.3"):
        config = TransformerConfig.tiny(version)
        paths[version] = write_checkpoint(root / f"ltx-{version}-tiny.safetensors",
                                          demo_transformer(config).state_dict(), config)
    return paths


@pytest.fixture
def no_model_work(monkeypatch):
    """A spy on the command line's model loads (the demo's and a checkpoint's transformer): a test of a request that
    must be refused before any model work fails if one starts."""
    def refuse(*args, **kwargs):
        raise AssertionError("models were loaded for a bad request")

    monkeypatch.setattr("ltx2_core.demo.demo_models", refuse)
    monkeypatch.setattr("ltx2_core.model_files.load_transformer", refuse)
