"""Where LTX-2.5's duration head is found (headers only): in a file of its own (`--duration-head`, or by its header
in a models folder), or among a transformer file's tensors (1.2.0's monolith layout); absent from LTX-2.3's files,
and a head of another release than the model's refused with both files named. Loaded with the model, in fp32."""

from __future__ import annotations

import shutil

import pytest
import torch

from ltx2_core.errors import CheckpointError
from ltx2_core.loader.file_kinds import file_kind
from ltx2_core.loader.sources import Component
from ltx2_core.model.duration_head import DurationHead
from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.model_files import ModelFiles
from support.checkpoints import write_checkpoint
from support.duration_head import add_duration_head, write_duration_head
from support.release25 import write_release25

from ltx2_core.demo import demo_transformer


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return write_release25(tmp_path_factory.mktemp("release") / "models")


def _files(paths, **fields) -> ModelFiles:
    return ModelFiles(str(paths["dev"]), str(paths["text_encoder"]), vae=str(paths["vae"]),
                      audio_vae=str(paths["audio_vae"]), version="2.5", **fields)


def test_a_head_file_of_its_own_is_its_kind_and_is_found_in_the_models_folder(release):
    assert file_kind(release["duration_head"]).kind == "duration head"
    assert file_kind(release["duration_head"]).version == "2.5"
    found = ModelFiles(str(release["dev"].parent.parent), vae=str(release["vae"]), version="2.5").resolved()
    assert found.duration_head == str(release["duration_head"]) and found.checkpoint == str(release["dev"])
    assert found.has_duration_head()
    assert found.sources()[Component.DURATION_HEAD].path == release["duration_head"]
    assert not _files(release).has_duration_head()  # the transformer file alone holds none


def test_the_head_given_is_loaded_with_the_model_in_fp32(release):
    files = _files(release, duration_head=str(release["duration_head"]))
    files.check("one-stage")
    models = files.load("cpu", torch.float32)
    assert isinstance(models.duration_head, DurationHead)
    assert next(models.duration_head.parameters()).dtype == torch.float32
    assert _files(release).load("cpu").duration_head is None


def test_a_transformer_file_holding_the_head_gives_it(release, tmp_path):
    transformer = shutil.copy(release["dev"], tmp_path / "ltx-2.5-with-head.safetensors")
    add_duration_head(transformer, TransformerConfig.tiny("2.5"))
    files = _files({**release, "dev": transformer})
    assert files.has_duration_head() and file_kind(transformer).kind == "transformer"
    assert files.sources()[Component.DURATION_HEAD].path == transformer


def test_ltx23_has_no_head_and_a_25_head_beside_it_is_refused(release, tmp_path):
    config = TransformerConfig.tiny("2.3")
    bundle = write_checkpoint(tmp_path / "ltx-2.3.safetensors", demo_transformer(config).state_dict(), config)
    assert not ModelFiles(str(bundle), "gemma", version="2.3").has_duration_head()
    head = write_duration_head(tmp_path / "head.safetensors", TransformerConfig.tiny("2.5"))
    files = ModelFiles(str(bundle), str(release["text_encoder"]), version="2.3", duration_head=str(head))
    with pytest.raises(CheckpointError, match="different LTX-2 releases"):
        files.check("one-stage")


def test_a_head_file_given_as_another_kind_is_refused(release):
    with pytest.raises(CheckpointError, match="this is an LTX-2.5 video VAE"):
        _files(release, duration_head=str(release["vae"])).check("one-stage")


def test_the_memory_plan_counts_the_head_as_loaded(release):
    """The head stays on the device for the run, in fp32: its bytes are counted with the decoders (headers only)."""
    from ltx2_core.memory.plan import duration_head_bytes

    files = _files(release, duration_head=str(release["duration_head"]))
    head = files.load("cpu", torch.float32).duration_head
    assert duration_head_bytes(files.sources()) == sum(p.numel() * 4 for p in head.parameters())
    assert duration_head_bytes(_files(release).sources()) == 0
