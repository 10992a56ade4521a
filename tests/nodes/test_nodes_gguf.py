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

from ltx2_core.errors import CheckpointError
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
    (roots["vae"][0] / "audio.safetensors").symlink_to(paths["audio_vae"])
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
    assert LTX2ModelLoader.VALIDATE_INPUTS(transformer="ltx-2.3-Q8_0.gguf") is True
    with pytest.raises(CheckpointError, match=r"video VAE.*not .*text projection.*\(text_projection\)"):
        node("LTX2ModelLoader", "ltx-2.3-Q8_0.gguf", "video.safetensors", "audio.safetensors", "fp32", "cpu",
             text_projection="misplaced-vae.safetensors")  # checked when the node runs, before any model work
    for name in (paths["checkpoint"], "../unet/ltx-2.3-Q8_0.gguf", "missing.gguf"):
        with pytest.raises((ValueError, FileNotFoundError)):
            bridge.model_path("diffusion_models", name)


def test_a_bad_gguf_is_refused_once_on_the_transformer_input_with_the_loaders_reason(tmp_path):
    """ComfyUI reports a VALIDATE_INPUTS failure on every input it names: the model loader names the transformer
    alone, and a GGUF that does not load gets the command line's reason (the file named as the input shows it), not
    a generic "not a transformer LTX-2 can use"."""
    import inspect

    import gguf
    import numpy as np

    from support.gguf_files import write_gguf

    assert list(inspect.signature(LTX2ModelLoader.VALIDATE_INPUTS).parameters) == ["transformer"]
    good = tmp_path / "good.gguf"
    write_gguf(good, {"transformer_blocks.0.attn1.to_q.weight": torch.randn(32, 64)}, gguf.GGMLQuantizationType.Q8_0)
    truncated = tmp_path / "ltx-2.3-22b-dev-Q4_K_M-partial.gguf"
    truncated.write_bytes(good.read_bytes()[:-100])
    flux = tmp_path / "flux1-dev-Q4_K_S.gguf"
    write_gguf(flux, {"double_blocks.0.img_attn.proj.weight": torch.randn(32, 64)}, arch="flux")
    iq2 = tmp_path / "ltx-2.3-IQ2_XXS.gguf"
    writer = gguf.GGUFWriter(iq2, "ltxv")
    writer.add_tensor("transformer_blocks.0.attn1.to_q.weight", np.zeros((16, 66), np.uint8),
                      raw_dtype=gguf.GGMLQuantizationType.IQ2_XXS)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    for path, reason in ((truncated, "truncated or damaged: download it again"),
                         (flux, "a GGUF of another model family (architecture 'flux')"),
                         (iq2, "stored as IQ2_XXS, which this package does not dequantise; use a GGUF of F16")):
        problem = LTX2ModelLoader.VALIDATE_INPUTS(transformer=str(path))
        assert problem.startswith(f"transformer: {path.name}: ") and reason in problem, problem
        assert "can use" not in problem and str(tmp_path) not in problem
