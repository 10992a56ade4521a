"""Is this file what the user says it is? A check that reads headers only (no tensor), for the early validation
of a model picked in a folder: a checkpoint, a text encoder, a LoRA or a latent upsampler; and LTX-2.5's component
files: a transformer, a video VAE, an audio VAE."""

from __future__ import annotations

import os

from ltx2_core.errors import CheckpointError
from ltx2_core.loader.checkpoint import config_metadata, transformer_config
from ltx2_core.loader.file_kinds import check_file_kind
from ltx2_core.loader.gemma_files import find_gemma
from ltx2_core.loader.gguf_file import gguf_transformer_config
from ltx2_core.loader.gguf_reader import is_gguf
from ltx2_core.loader.layouts import RELEASED_CHECKPOINTS
from ltx2_core.loader.lora import LoraError
from ltx2_core.loader.safetensors_file import read_header
from ltx2_core.loader.sources import DECODING, SECTIONS
from ltx2_core.loader.upsampler_weights import upsampler_config
from ltx2_core.loader.vae_weights import video_vae_kind

# the config sections a checkpoint needs besides the transformer's: those of the components decoding reads from it
BUNDLED = tuple(dict.fromkeys(SECTIONS[component] for component in DECODING))
KINDS = ("checkpoint", "text encoder", "LoRA", "latent upsampler", "transformer", "video VAE", "audio VAE",
         "text projection")
_LORA_SUFFIXES = (".lora_A.weight", ".lora_down.weight")


def check_kind(path: str | os.PathLike, kind: str) -> None:
    """CheckpointError (or a subclass) naming what is wrong when `path` is not a `kind` file (one of KINDS)."""
    if kind == "text encoder":
        find_gemma(path)
        return
    if is_gguf(path):
        config = gguf_transformer_config(path)  # names a GGUF of another family or a text encoder
        if kind != "transformer":
            raise CheckpointError(f"{path}: an LTX-{config.version.value} transformer GGUF, not a {kind}; load it "
                                  "from diffusion_models as the transformer, with its VAE files")
        return
    file = read_header(path, kind)
    if kind == "checkpoint":
        release = transformer_config(file).version.value
        missing = [name for name in BUNDLED if name not in config_metadata(file)]
        if missing and release not in RELEASED_CHECKPOINTS:
            raise CheckpointError(f"{file.path}: an LTX-{release} transformer file, whose VAEs and vocoder are files "
                                  "of their own; load it from diffusion_models with its video VAE and audio VAE files")
        if missing:
            raise CheckpointError(f"{file.path}: an LTX-{release} transformer without the {', '.join(missing)} it "
                                  f"needs for decoding; use the full LTX-{release} checkpoint "
                                  f"({RELEASED_CHECKPOINTS[release]})")
    elif kind in ("transformer", "video VAE", "audio VAE"):
        check_file_kind(path, kind)
        if kind == "transformer":
            transformer_config(file)
        elif kind == "video VAE":
            video_vae_kind(file)
        elif not {"audio_vae", "vocoder"} <= set(config_metadata(file)):
            raise CheckpointError(f"{file.path}: an audio VAE file needs both the 'audio_vae' and the 'vocoder' "
                                  "sections of the 'config' metadata; use ltx-2.5-audio-vae-bf16.safetensors")
    elif kind == "text projection":  # ComfyUI's embeddings connector files, or the official bundle
        check_file_kind(path, kind)
    elif kind == "latent upsampler":
        upsampler_config(file)
    elif kind == "LoRA":
        if not any(name.endswith(_LORA_SUFFIXES) for name in file.tensors):
            raise LoraError(f"{file.path}: not a LoRA (no lora_A / lora_down weights); pick a LoRA trained for LTX-2")
    else:
        raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
