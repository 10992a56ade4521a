"""File inputs inside ComfyUI resolve only to what ComfyUI lists in the kind's models folder: absolute paths, `..`,
names reaching through symlinks and folders elsewhere are refused without a look at them, and no error echoes a
foreign file's content or tells which folders exist. Links an administrator put in a models folder count as
ComfyUI counts them: what it lists there may be picked. (bridge's `folder_paths` stands in for ComfyUI's here; the
e2e tests probe a real ComfyUI.)"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from nodes import bridge
from nodes.loaders import LTX2CheckpointLoader, LTX2LoraLoader, LTX2TextEncoderLoader


def _folder_paths(roots: dict[str, list[Path]]) -> SimpleNamespace:
    """ComfyUI's folder_paths for these folders: files listed recursively (symlinks followed), as ComfyUI does."""
    def listed(folder):
        names = []
        for root in roots[folder]:
            for parent, _, files in os.walk(root, followlinks=True):
                names += [os.path.relpath(os.path.join(parent, f), root) for f in files if f.endswith(".safetensors")]
        return names

    def full_path(folder, name):
        for root in roots[folder]:
            if os.path.isfile(root / name):
                return str(root / name)
        raise FileNotFoundError(name)

    return SimpleNamespace(get_filename_list=listed, get_folder_paths=lambda folder: [str(r) for r in roots[folder]],
                           get_full_path_or_raise=full_path)


@pytest.fixture
def comfy_folders(tmp_path, monkeypatch, files, gemma_files):
    models, outside = tmp_path / "models", tmp_path / "outside"
    roots = {name: [models / name] for name in ("checkpoints", "text_encoders", "loras", "latent_upscale_models")}
    for folders in roots.values():
        folders[0].mkdir(parents=True)
    (roots["checkpoints"][0] / "ltx.safetensors").symlink_to(files["checkpoint"])  # an admin's link: listed
    (roots["text_encoders"][0] / "gemma-3-12b-it").symlink_to(gemma_files[1])
    (roots["text_encoders"][0] / "empty-folder").mkdir()
    foreign = outside / "private-model"
    foreign.mkdir(parents=True)
    (foreign / "config.json").write_text(json.dumps({"model_type": "secret_model_type_xyz"}))
    (foreign / "secret-weights.safetensors").write_bytes(b"not listed")
    (roots["loras"][0] / "escape").symlink_to(outside)  # a link to a folder, as a name path would reach through it
    monkeypatch.setattr(bridge, "IN_COMFYUI", True)
    monkeypatch.setattr(bridge, "folder_paths", _folder_paths(roots))
    return SimpleNamespace(models=models, outside=outside, foreign=foreign)


def file_problem(kind: str, name: str) -> str | bool:
    loader = {"checkpoint": LTX2CheckpointLoader, "text encoder": LTX2TextEncoderLoader, "LoRA": LTX2LoraLoader}[kind]
    return loader.VALIDATE_INPUTS(name)


def test_the_listed_files_and_model_folders_resolve(comfy_folders):
    assert LTX2CheckpointLoader.VALIDATE_INPUTS(ckpt_name="ltx.safetensors") is True
    assert LTX2TextEncoderLoader.VALIDATE_INPUTS(text_encoder="gemma-3-12b-it") is True


@pytest.mark.parametrize("kind, name", [
    ("text encoder", "ABS"),  # a Hugging Face folder anywhere on disk
    ("text encoder", "../../outside/private-model"),
    ("text encoder", "gemma-3-12b-it/../../../outside/private-model"),
    ("text encoder", "empty-folder"),  # a folder in models/text_encoders that holds no model
    ("checkpoint", "ABS/secret-weights.safetensors"),
    ("checkpoint", "../../outside/private-model/secret-weights.safetensors"),
    ("LoRA", "escape/private-model/config.json"),  # through a folder link, to a file ComfyUI does not list
    ("LoRA", "escape/private-model"),
    ("LoRA", "/etc/passwd"),
])
def test_paths_outside_the_folders_are_refused_without_echoing_them(comfy_folders, kind, name):
    name = name.replace("ABS", str(comfy_folders.foreign))
    seen = []
    real_open = open

    def watched_open(path, *args, **kwargs):
        seen.append(str(path))
        return real_open(path, *args, **kwargs)

    import builtins

    builtins.open = watched_open
    try:
        problem = file_problem(kind, name)
    finally:
        builtins.open = real_open
    assert isinstance(problem, str)
    assert "secret_model_type_xyz" not in problem and "secret-weights" not in problem.replace(name, "")
    echoed = problem.replace(name, "")  # the caller's own value may come back, nothing else of the disk
    assert "config.json" not in echoed and str(comfy_folders.outside) not in echoed
    assert not [path for path in seen if str(comfy_folders.outside) in path], seen  # nothing outside was opened
    with pytest.raises((ValueError, FileNotFoundError)):
        bridge.model_path({"text encoder": "text_encoders", "checkpoint": "checkpoints", "LoRA": "loras"}[kind],
                          name, marker="config.json")


def test_a_missing_folder_and_an_existing_one_outside_read_the_same(comfy_folders):
    """Nothing tells an API caller which folders exist."""
    existing = file_problem("text encoder", "../../outside/private-model")
    missing = file_problem("text encoder", "../../outside/no-such-model")
    assert existing.replace("private-model", "X") == missing.replace("no-such-model", "X")
