"""The files of an LTX-2.5 model found in a folder by their headers: ComfyUI's models folder (`diffusion_models/`,
`text_encoders/`, `vae/`, `latent_upscale_models/`, `loras/`; or ComfyUI's folder holding it) or one flat folder
holding the release's files.

Each component is the one file of its kind (`file_kinds`) and release in the folder(s) ComfyUI keeps it in. Where a
folder holds several of a kind, those of the transformer's release are kept (by header; only among files whose
header names no release, as upsamplers and LoRAs, by an "ltx-2.5" in the name); the transformer is the distilled
one for the distilled mode and the other for the rest when the names tell them apart. A choice still open (two dev
transformers, both video VAEs, two text encoders) is refused listing the files and the flag that picks one; a
component given by its flag is not looked for.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ltx2_core.errors import CheckpointError, LTX2Error
from ltx2_core.loader.file_kinds import TEMPORAL, FileKind, file_kind

# ModelFiles field -> (file kind, the ComfyUI folders it lives in, the command line's flag)
WANTED: Mapping[str, tuple[str, tuple[str, ...], str]] = {
    "checkpoint": ("transformer", ("diffusion_models", "unet"), "--checkpoint"),
    "text_encoder": ("text encoder", ("text_encoders", "clip"), "--text-encoder"),
    "vae": ("video VAE", ("vae",), "--vae"),
    "audio_vae": ("audio VAE", ("vae",), "--audio-vae"),
    "upsampler": ("latent upsampler", ("latent_upscale_models",), "--upsampler"),
    "distilled_lora": ("LoRA", ("loras",), "--distilled-lora"),
    "temporal_upsampler": ("latent upsampler", ("latent_upscale_models",), "--temporal-upsampler"),
    "duration_head": ("duration head", ("diffusion_models", "unet"), "--duration-head"),  # optional (`_duration_head`)
}
# fields looked for in a mode that a run may do without (found when the folder holds one, left out when none)
OPTIONAL = {"dfr": ("temporal_upsampler",)}
RELEASE_FILES = {
    "checkpoint": "ltx-2.5-22b-{dev,distilled}-transformer-bf16.safetensors",
    "text_encoder": "gemma4-12b-with-proj-ltx-2.5-bf16.safetensors",
    "vae": "ltx-2.5-video-vae-bf16.safetensors (diffusion decoder) or ltx-2.5-video-vae-conv-bf16.safetensors "
           "(convolutional decoder)",
    "audio_vae": "ltx-2.5-audio-vae-bf16.safetensors",
    "upsampler": "ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors",
    "distilled_lora": "ltx-2.5-22b-distilled-lora-450-bf16.safetensors",
    "temporal_upsampler": "DFR's temporal x2 latent upsampler (not public yet)",
    # not public (nor verified) yet: 1.2.0 reads it from the transformer's `duration_head.*` keys or its own file
    "duration_head": "the transformer file's duration_head.* tensors, or a duration head file of its own",
}
_SUFFIX = ".safetensors"


def find_release_files(folder: str | os.PathLike, mode: str, given: Mapping[str, str | None]) -> dict[str, str]:
    """ModelFiles field -> path of each file `mode` needs that `given` (field -> path or None) does not name, found
    in `folder`; CheckpointError naming the folder, the files and the flag when one is missing or ambiguous."""
    root = Path(folder)
    comfyui = _holds_folders(root)
    if not comfyui and _holds_folders(root / "models"):  # ComfyUI's own folder
        root, comfyui = root / "models", True
    kinds: dict[Path, FileKind | None] = {}
    found: dict[str, str] = {}
    needed = ["checkpoint", "text_encoder", "vae", "audio_vae"]
    needed += ["upsampler"] if mode != "one-stage" else []
    needed += ["distilled_lora"] if mode in ("two-stage", "keyframes", "two-stage-hq") else []  # GUIDED_TWO_STAGE, HQ
    needed += OPTIONAL.get(mode, ())
    release = None
    for field in needed:
        if given.get(field) is not None:
            continue
        kind, folders, flag = WANTED[field]
        places = [root / name for name in folders] if comfyui else [root]
        candidates = [path for path in _files(places, recursive=comfyui) if _kind(path, kinds) is not None
                      and kinds[path].kind == kind]
        if field == "distilled_lora":
            candidates = [path for path in candidates if "distilled" in path.name.lower()]
        if kind == "latent upsampler":  # the spatial and the temporal one share a kind and a folder
            candidates = [path for path in candidates if (kinds[path].detail == TEMPORAL) == (field != "upsampler")]
        picked = _narrow(candidates, kinds, release or "2.5", field, mode)
        if not picked and field in OPTIONAL.get(mode, ()):
            continue
        if not picked:
            raise CheckpointError(_missing(root, field, places, comfyui))
        if len(picked) > 1:
            listing = ", ".join(str(path) for path in picked)
            raise CheckpointError(f"{root} holds {len(picked)} files for the {kind} ({listing}); pick one with "
                                  f"{flag} PATH" + _pick_hint(field))
        found[field] = str(picked[0])
        if field == "checkpoint":
            release = kinds[picked[0]].version
    if given.get("duration_head") is None and (head := _duration_head(root, comfyui, kinds, release or "2.5")):
        found["duration_head"] = head
    return found


def find_duration_head(folder: str | os.PathLike, release: str = "2.5") -> str | None:
    """The one duration head file of `release` directly in `folder` (by header; e.g. a transformer's folder), None
    when there is none or several."""
    return _duration_head(Path(folder), False, {}, release)


def _duration_head(root: Path, comfyui: bool, kinds: dict[Path, FileKind | None], release: str) -> str | None:
    """The one duration head file of `release` in the transformer's folders (optional: the transformer's file may
    hold the head, and only a run of automatic length needs it); None when there is none, or several."""
    _, folders, _ = WANTED["duration_head"]
    places = [root / name for name in folders] if comfyui else [root]
    heads = [path for path in _files(places, recursive=comfyui) if _kind(path, kinds) is not None
             and kinds[path].kind == "duration head" and kinds[path].version in (release, None)]
    return str(heads[0]) if len(heads) == 1 else None


def _holds_folders(root: Path) -> bool:
    return any((root / name).is_dir() for _, folders, _ in WANTED.values() for name in folders)


def _files(places: list[Path], recursive: bool) -> list[Path]:
    files = []
    for place in places:
        if place.is_dir():
            pattern = place.rglob(f"*{_SUFFIX}") if recursive else place.glob(f"*{_SUFFIX}")
            files += sorted(path for path in pattern if path.is_file())
    return files


def _kind(path: Path, kinds: dict[Path, FileKind | None]) -> FileKind | None:
    """The file's kind, read once per search; None for a file that is no safetensors file."""
    if path not in kinds:
        try:
            kinds[path] = file_kind(path)
        except LTX2Error:
            kinds[path] = None
    return kinds[path]


def _narrow(candidates: list[Path], kinds: Mapping[Path, FileKind | None], release: str, field: str,
            mode: str) -> list[Path]:
    """The candidates of `release`: by header, else those without a version, narrowed by an "ltx-2.5" in the name
    when several (a header that names the release outranks any name: two of them stay two)."""
    exact = [path for path in candidates if kinds[path].version == release]
    pool = exact or [path for path in candidates if kinds[path].version is None and field != "text_encoder"]
    if not exact and len(pool) > 1:
        pool = [path for path in pool if f"ltx-{release}" in path.name.lower()] or pool
    if field == "checkpoint" and len(pool) > 1:
        distilled = [path for path in pool if "distilled" in path.name.lower()]
        pool = (distilled if mode == "distilled" else [p for p in pool if p not in distilled]) or pool
    return pool


def _missing(root: Path, field: str, places: list[Path], comfyui: bool) -> str:
    kind, _, flag = WANTED[field]
    where = ", ".join(str(place) for place in places) if comfyui else str(root)
    if field == "checkpoint":
        return (f"--checkpoint {root} is a directory without an LTX-2.5 transformer file (looked in {where}); pass an "
                "LTX-2 / LTX-2.3 checkpoint file, an LTX-2.5 transformer file, or a folder holding LTX-2.5's files "
                "(ComfyUI's models folder or one flat folder)")
    return (f"{root}: no LTX-2.5 {kind} file in {where}; put {RELEASE_FILES[field]} there or pass it with "
            f"{flag} PATH")


def _pick_hint(field: str) -> str:
    if field == "vae":
        return " (the diffusion decoder: the release's default quality; the convolutional one: faster, less memory)"
    if field == "checkpoint":
        return (" as --checkpoint together with --text-encoder, --vae and --audio-vae, or keep one transformer in the "
                "folder")
    return ""
