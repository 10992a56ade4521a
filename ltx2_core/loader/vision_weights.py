"""The Gemma 3 vision tower and projector read from the text encoder's own file(s) (image-to-video prompt
enhancement, `ltx2_core.model.text.enhance`); the loader hands it to the encoder as `PromptEncoder.load_vision`."""

from __future__ import annotations

import torch

from ltx2_core.errors import CheckpointError
from ltx2_core.loader.safetensors_file import read_header, read_tensors
from ltx2_core.model.text.vision import PROJECTOR_PREFIXES, TOWER_PREFIXES, VisionSettings, VisionTower


def load_vision_tower(source, text_hidden: int, device: torch.device | str, dtype: torch.dtype) -> VisionTower:
    """The tower and projector of a `GemmaSource`'s file(s), on `device` in `dtype`; CheckpointError naming the fix
    when the file has none."""
    settings = VisionSettings.of(source)
    tower = VisionTower(settings, text_hidden)
    # transformers 4.x nests the SigLIP weights under `vision_model.`, 5.x does not
    inner = "tower.vision_model." if any(k.startswith("vision_model.") for k in tower.tower.state_dict()) else "tower."
    files = [source.path] if source.layout != "huggingface" else sorted(source.path.glob("*.safetensors"))
    state = {}
    for path in files:
        header = read_header(path, "text encoder")
        keys = {}
        for name in header.tensors:
            for prefixes, target in ((TOWER_PREFIXES, inner), (PROJECTOR_PREFIXES, "projector.")):
                prefix = next((p for p in prefixes if name.startswith(p)), None)
                if prefix is not None:
                    keys[target + name[len(prefix):]] = name
                    break
        state |= read_tensors(header, keys, device=device, dtype=dtype)
    expected = set(tower.state_dict())
    missing = sorted(expected - set(state))
    if missing:
        raise CheckpointError(f"{source.path}: no Gemma 3 vision tower ({len(missing)} of its tensors missing, e.g. "
                              f"{missing[:2]}); image-to-video prompt enhancement needs the text encoder file with "
                              "its vision part (ComfyUI's gemma_3_12B_it.safetensors or the google/gemma-3-12b-it "
                              "folder), or enhance without the image")
    tower.load_state_dict({k: state[k] for k in expected}, strict=True, assign=True)
    for module in tower.modules():  # the non-persistent buffers a meta build leaves empty: SigLIP's patch positions
        for name, buffer in list(module.named_buffers(recurse=False)):
            if buffer.is_meta:
                if name != "position_ids":
                    raise RuntimeError(f"vision tower buffer {name} left unloaded")
                module.register_buffer(name, torch.arange(buffer.shape[-1], device=device).expand(buffer.shape),
                                       persistent=False)
    return tower.eval().requires_grad_(False)
