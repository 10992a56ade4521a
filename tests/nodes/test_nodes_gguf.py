"""A GGUF transformer through the nodes: the model loader of separate files lists the `.gguf` files of ComfyUI's
diffusion_models folders (models/diffusion_models and models/unet, ComfyUI-GGUF's) beside the safetensors, takes the
text projection file a GGUF needs, and samples what the same weights dequantised into a bundle sample; a GGUF without
its text path is refused naming the input."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("gguf")

from support.gguf_files import write_gguf_model
from support.node_calls import node

from nodes import bridge
from nodes.loaders import LTX2ModelLoader


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf_nodes")
    paths = {}
    for version, connectors in (("2.3", True), ("2.0", False)):
        (root / version).mkdir()
        written = write_gguf_model(root / version, version, connectors=connectors)
        paths[version] = {field: str(path) for field, path in written.items()}
    return paths


def _sampled(model, gemma: str):
    (encoder,) = node("LTX2TextEncoderLoader", gemma, model, "cpu", False)
    conditioning = node("LTX2TextEncode", encoder, "a red car in the rain", "blurry")[0]
    (latent,) = node("LTX2EmptyLatent", 64, 32, 9)
    return node("LTX2Sampler", model, conditioning, latent, 3, 2, "ltx2")[0]


def test_a_gguf_model_samples_what_its_dequantised_bundle_samples(models, gemma_files):
    paths, gemma = models["2.3"], str(gemma_files[0])
    (model,) = node("LTX2ModelLoader", paths["checkpoint"], paths["vae"], paths["audio_vae"], "fp32", "cpu",
                    text_projection=paths["text_projection"])
    assert model.config.version.value == "2.3" and "embeddings_connector" in model.files.label
    (twin,) = node("LTX2CheckpointLoader", paths["twin"], "fp32", "cpu")
    got, want = _sampled(model, gemma), _sampled(twin, gemma)
    assert got.video.std() > 0
    torch.testing.assert_close(got.video, want.video, atol=1e-5, rtol=0)
    torch.testing.assert_close(got.audio, want.audio, atol=1e-5, rtol=0)


def test_a_gguf_without_its_text_path_is_refused_naming_the_input(models):
    paths = models["2.0"]
    with pytest.raises(ValueError, match="transformer ltx-2.0-tiny-Q8_0.gguf is an LTX-2.0 transformer without its "
                                         "text connectors") as caught:
        node("LTX2ModelLoader", paths["checkpoint"], paths["vae"], paths["audio_vae"], "fp32", "cpu")
    assert "give text_projection" in str(caught.value) and "embeddings_connector" in str(caught.value)


def test_the_loader_lists_gguf_files_of_diffusion_models_and_unet(models, tmp_path, monkeypatch):
    roots = {"diffusion_models": [tmp_path / "models" / "unet", tmp_path / "models" / "diffusion_models"],
             "vae": [tmp_path / "models" / "vae"], "text_encoders": [tmp_path / "models" / "text_encoders"],
             "checkpoints": [tmp_path / "models" / "checkpoints"]}
    for folders in roots.values():
        for folder in folders:
            folder.mkdir(parents=True)
    paths = models["2.3"]
    (roots["diffusion_models"][0] / "ltx-2.3-Q8_0.gguf").symlink_to(paths["checkpoint"])
    (roots["diffusion_models"][1] / "sub").mkdir()
    (roots["diffusion_models"][1] / "sub" / "ltx-2.3-copy.gguf").symlink_to(paths["checkpoint"])
    (roots["vae"][0] / "video.safetensors").symlink_to(paths["vae"])
    (roots["text_encoders"][0] / "connector.safetensors").symlink_to(paths["text_projection"])
    (roots["text_encoders"][0] / "misplaced-vae.safetensors").symlink_to(paths["vae"])

    def listed(folder):  # ComfyUI's own lists: no .gguf (ComfyUI-GGUF registers its own folder key)
        return [os.path.relpath(os.path.join(parent, f), root) for root in roots[folder]
                for parent, _, files in os.walk(root, followlinks=True) for f in files if f.endswith(".safetensors")]

    def full_path(folder, name):
        return next(str(r / name) for r in roots[folder] if (r / name).is_file())

    monkeypatch.setattr(bridge, "IN_COMFYUI", True)
    monkeypatch.setattr(bridge, "folder_paths", SimpleNamespace(
        get_filename_list=listed, get_folder_paths=lambda folder: [str(r) for r in roots[folder]],
        get_full_path_or_raise=full_path))
    inputs = LTX2ModelLoader.INPUT_TYPES()
    assert {"ltx-2.3-Q8_0.gguf", "sub/ltx-2.3-copy.gguf"} <= set(inputs["required"]["transformer"][0])
    assert inputs["optional"]["text_projection"][0] == ["none", "connector.safetensors", "misplaced-vae.safetensors"]
    assert bridge.model_path("diffusion_models", "sub/ltx-2.3-copy.gguf").endswith("ltx-2.3-copy.gguf")
    assert LTX2ModelLoader.VALIDATE_INPUTS(transformer="ltx-2.3-Q8_0.gguf", video_vae="video.safetensors",
                                           text_projection="connector.safetensors") is True
    problem = LTX2ModelLoader.VALIDATE_INPUTS(transformer="ltx-2.3-Q8_0.gguf",
                                              text_projection="misplaced-vae.safetensors")
    assert problem.startswith("text_projection: misplaced-vae.safetensors is a video VAE file, not a text "
                              "projection: put it in models/vae"), problem
    for name in (paths["checkpoint"], "../unet/ltx-2.3-Q8_0.gguf", "missing.gguf"):
        with pytest.raises((ValueError, FileNotFoundError)):
            bridge.model_path("diffusion_models", name)
