"""DFR's temporal x2 upsampler as a file (not public yet: written in the spatial files' layout, `temporal_upsample`
true): its kind, the release folder's lookup telling it from the spatial upsampler (both live in
latent_upscale_models/), ModelFiles' refusals of either file given for the other, and its loading."""

from __future__ import annotations

import shutil

import pytest
import torch

from ltx2_core.errors import CheckpointError, ConfigError
from ltx2_core.loader.file_kinds import TEMPORAL, file_kind
from ltx2_core.loader.release_folder import find_release_files
from ltx2_core.model_files import ModelFiles
from support.model_files import write_temporal_upsampler
from support.release25 import write_release25


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    models = tmp_path_factory.mktemp("models")
    paths = write_release25(models)
    paths["temporal"] = write_temporal_upsampler(
        models / "latent_upscale_models" / "ltx-2.5-latent-temporal-upscaler-x2.safetensors")
    return models, paths


def test_the_file_is_a_temporal_latent_upsampler(release):
    _, paths = release
    assert file_kind(paths["temporal"]).kind == "latent upsampler"
    assert file_kind(paths["temporal"]).detail == TEMPORAL and file_kind(paths["upsampler"]).detail == ""


def test_the_folder_lookup_tells_the_two_upsamplers_apart(release, tmp_path):
    models, paths = release
    found = find_release_files(models, "dfr", {"vae": "given"})
    assert found["upsampler"] == str(paths["upsampler"]) and found["temporal_upsampler"] == str(paths["temporal"])
    assert "temporal_upsampler" not in find_release_files(models, "two-stage", {"vae": "given"})  # other modes never look
    lone = tmp_path / "models"
    shutil.copytree(models, lone)
    (lone / "latent_upscale_models" / paths["temporal"].name).unlink()
    assert "temporal_upsampler" not in find_release_files(lone, "dfr", {"vae": "given"})  # optional: rounds 0 need none
    shutil.copy(paths["temporal"], lone / "latent_upscale_models" / "a.safetensors")
    shutil.copy(paths["temporal"], lone / "latent_upscale_models" / "b.safetensors")
    with pytest.raises(CheckpointError, match="2 files for the latent upsampler .* --temporal-upsampler PATH"):
        find_release_files(lone, "dfr", {"vae": "given"})


def test_either_upsampler_given_for_the_other_is_refused(release):
    _, paths = release
    base = dict(checkpoint=str(paths["dev"]), text_encoder=str(paths["text_encoder"]), vae=str(paths["vae"]),
                audio_vae=str(paths["audio_vae"]), distilled_lora=str(paths["distilled_lora"]))
    ModelFiles(**base, upsampler=str(paths["upsampler"]), temporal_upsampler=str(paths["temporal"])).check("two-stage")
    with pytest.raises(ConfigError, match="--upsampler .* is a temporal latent upsampler .* --temporal-upsampler"):
        ModelFiles(**base, upsampler=str(paths["temporal"])).check("two-stage")
    with pytest.raises(ConfigError, match="--temporal-upsampler .* is a spatial latent upsampler .* --upsampler"):
        ModelFiles(**base, upsampler=str(paths["upsampler"]),
                   temporal_upsampler=str(paths["upsampler"])).check("two-stage")
    with pytest.raises(CheckpointError, match="--temporal-upsampler"):  # not an upsampler at all
        ModelFiles(**base, upsampler=str(paths["upsampler"]),
                   temporal_upsampler=str(paths["distilled_lora"])).check("two-stage")
    with pytest.raises(ValueError, match="--temporal-upsampler needs --checkpoint"):
        ModelFiles(temporal_upsampler=str(paths["temporal"])).check("two-stage")


def test_the_temporal_upsampler_loads_from_a_file_or_the_folder(release):
    models, paths = release
    loaded = ModelFiles(checkpoint=str(models), vae=str(paths["vae"])).load_temporal_upsampler()
    assert loaded is not None and loaded.config.temporal
    assert loaded(torch.randn(1, 128, 2, 2, 2)).shape == (1, 128, 3, 2, 2)
    assert ModelFiles(checkpoint=str(paths["dev"])).load_temporal_upsampler() is None
    assert ModelFiles().load_temporal_upsampler() is None


def test_either_direction_loads_when_asked_and_a_two_stage_run_refuses_the_temporal_one(release):
    """`load_upsampler(temporal=None)` (LTX-2 Latent Upsampler Loader) takes the file its header says; a two-stage
    request given the temporal upsampler is refused before any model work, naming the spatial file."""
    from ltx2_core import Models, Request, load_upsampler
    from ltx2_core.demo import demo_transformer
    from ltx2_core.model.transformer.config import TransformerConfig
    from ltx2_core.pipeline import check_request

    _, paths = release
    temporal = load_upsampler(str(paths["temporal"]), temporal=None)
    spatial = load_upsampler(str(paths["upsampler"]), temporal=None)
    assert temporal.config.temporal and not spatial.config.temporal
    transformer = demo_transformer(TransformerConfig.tiny("2.5"), seed=0)
    request = Request("x", width=128, height=128, frames=9, mode="distilled")
    check_request(request, Models(transformer, None, None, spatial))  # the spatial one passes
    with pytest.raises(ValueError, match="need the x2 spatial latent upsampler"):
        check_request(request, Models(transformer, None, None, temporal))


def test_the_memory_plan_counts_the_temporal_upsampler_beside_the_spatial_one(release):
    from ltx2_core.memory.sizes import side_bytes, upsampler_bytes

    _, paths = release
    sources = ModelFiles(checkpoint=str(paths["dev"]), vae=str(paths["vae"])).sources()
    common = dict(images=0, frames=97, height=128, width=128)
    spatial = side_bytes(sources, str(paths["text_encoder"]), str(paths["upsampler"]), torch.bfloat16, **common)
    both = side_bytes(sources, str(paths["text_encoder"]), str(paths["upsampler"]), torch.bfloat16, **common,
                      temporal_upsampler=str(paths["temporal"]))
    temporal = upsampler_bytes(str(paths["temporal"]), torch.bfloat16)
    assert temporal > 0 and both.upsampler == spatial.upsampler + temporal
    assert both._replace(upsampler=spatial.upsampler) == spatial  # nothing else changes
