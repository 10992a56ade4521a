"""What an LTX-2 file is, from its header alone: its kind, its release when the header tells it, and where it
belongs in ComfyUI, so that a file picked in the wrong place, or files of two releases mixed in one model, are
refused before anything loads, naming each file, what it is and what belongs there.

LTX-2.0 and 2.3 ship one bundled checkpoint (DiT, text projection and connectors, both VAEs, vocoder; a `config`
metadata entry with a section per component). LTX-2.5 ships one file per component (Lightricks' split layout, the
one ComfyUI's folders keep): the transformer (`diffusion_models/`, the DiT and the text connectors under
`model.diffusion_model.`, `config.transformer`, `model_version`, `gemma_source_checkpoint`), the text encoder
(`text_encoders/`, Gemma 4 with the text projection, `gemma_config` metadata and a `tokenizer_json` tensor), the video
VAE (`vae/`, `config.vae` whose `_class_name` tells the convolutional decoder from the diffusion one), the audio VAE
(`vae/`, `config.audio_vae` + `config.vocoder`, tensors under `audio_vae.` and `vocoder.`), the latent upsampler
(`latent_upscale_models/`, a flat `config`) and LoRAs (`loras/`, `lora_A`/`lora_B` pairs). A text projection file (ComfyUI's embeddings connector files, for a GGUF
or separate transformer) holds only the text projection and the text connectors.

A release is read from `model_version`; where a component file has none (a VAE or an upsampler saved out of a 2.0 /
2.3 release by a user or a converter), from its form: a convolutional video VAE's decoder resampling blocks and
padding (or, without any metadata, its shapes) are 2.0's or 2.3's released ones; a flat HiFi-GAN vocoder is 2.0's;
a rational x2 upsampler is 2.0's. 2.3's and 2.5's audio VAEs and plain upsamplers share one form, so only their
`model_version` tells them apart.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import NamedTuple

from ltx2_core.errors import CheckpointError
from ltx2_core.loader.gguf_file import gguf_transformer_config
from ltx2_core.loader.gguf_reader import is_gguf
from ltx2_core.loader.safetensors_file import SafetensorsFile, read_header
from ltx2_core.loader.vae_weights import released_vae_release

# kind -> the ComfyUI models folder it belongs in
FOLDERS: Mapping[str, str] = {
    "checkpoint": "checkpoints",
    "transformer": "diffusion_models",
    "text encoder": "text_encoders",
    "video VAE": "vae",
    "audio VAE": "vae",
    "latent upsampler": "latent_upscale_models",
    "LoRA": "loras",
    "text projection": "text_encoders",  # ComfyUI's ltx-2*-embeddings_connector*.safetensors (a GGUF's text path)
    "duration head": "diffusion_models",  # LTX-2.5's duration head in a file of its own (beside its transformer)
}
CONV_DECODER, DIFFUSION_DECODER = "convolutional decoder", "diffusion decoder"
TEMPORAL = "temporal x2"  # the detail of DFR's frame-doubling latent upsampler
_CONV_CLASS = "CausalVideoAutoencoder"  # config.vae._class_name of the convolutional VAE (every 2.0/2.3 VAE)
_LORA_SUFFIXES = (".lora_A.weight", ".lora_down.weight")
_DIT_BLOCK = re.compile(r"(^|\.)transformer_blocks\.\d+\.")
_TEXT_PATH = re.compile(r"^(text_embedding_projection\.|(model\.diffusion_model\.)?(video|audio)_embeddings_connector\.)")
_VERSION = re.compile(r"^\s*(\d+)[.-](\d+)")
# Gemma backbones by the `model_type` of a text encoder's `gemma_config`, and the releases each serves
_GEMMA_RELEASE = {"gemma3": None, "gemma3_text": None, "gemma4": "2.5", "gemma4_unified": "2.5"}


class FileKind(NamedTuple):
    """kind: a key of FOLDERS, or "unknown"; version: "2.0", "2.3", "2.5"... when the header tells it; detail: e.g.
    which video decoder or which Gemma."""

    kind: str
    version: str | None = None
    detail: str = ""

    def describe(self) -> str:
        """E.g. 'an LTX-2.5 video VAE (diffusion decoder)'; 'a file of no LTX-2 kind' for "unknown"."""
        if self.kind == "unknown":
            return f"a file of no LTX-2 kind{f' ({self.detail})' if self.detail else ''}"
        name = f"LTX-{self.version} {self.kind}" if self.version else f"LTX-2 {self.kind}"
        article = "an" if name[0] in "AEIOU" or name.startswith("LTX") else "a"
        return f"{article} {name}{f' ({self.detail})' if self.detail else ''}"

    @property
    def folder(self) -> str | None:
        return FOLDERS.get(self.kind)


def file_kind(path: str | os.PathLike) -> FileKind:
    """The kind of the safetensors file at `path` (headers only; CheckpointError for a file that is not one); a
    `.gguf` file is a transformer (`loader.gguf_file`; CheckpointError naming any other GGUF)."""
    if is_gguf(path):
        return FileKind("transformer", gguf_transformer_config(path).version.value, "GGUF")
    return kind_of(read_header(path, "model file"))


def kind_of(file: SafetensorsFile) -> FileKind:
    """The kind of an already read header (see the module's docstring for what tells each apart)."""
    names = file.tensors
    if any(name.endswith(_LORA_SUFFIXES) for name in names):
        return FileKind("LoRA")
    if "gemma_config" in file.metadata or "tokenizer_json" in names or "spiece_model" in names:
        return _text_encoder(file)
    config = _config(file)
    version = release_of(file.metadata.get("model_version"))
    if names and all(name.startswith("duration_head.") for name in names):  # before "transformer": its config has one
        return FileKind("duration head", version or "2.5")
    if names and all(_TEXT_PATH.match(name) for name in names):  # 2.0's projection is one matrix, later ones two
        return FileKind("text projection", version or ("2.0" if "text_embedding_projection.aggregate_embed.weight"
                                                                in names else None))
    if "transformer" in config or any(_DIT_BLOCK.search(name) for name in names):
        if "vae" in config or any(name.startswith("vae.decoder.") for name in names):
            return FileKind("checkpoint", version)
        return FileKind("transformer", version)
    if "vae" in config:
        vae = config["vae"] if isinstance(config["vae"], dict) else {}
        if vae.get("_class_name", _CONV_CLASS) == _CONV_CLASS:  # 2.0 to 2.5 (a VAE saved out of a bundle, too)
            return FileKind("video VAE", version or released_vae_release(file), CONV_DECODER)
        return FileKind("video VAE", version or "2.5", DIFFUSION_DECODER)  # first shipped with 2.5
    if "audio_vae" in config or "vocoder" in config:
        return FileKind("audio VAE", version or _audio_vae_release(config))
    if config and ("spatial_upsample" in config or "mid_channels" in config):
        temporal = config.get("temporal_upsample") is True and config.get("spatial_upsample") is False
        return FileKind("latent upsampler", version or _upsampler_release(config), TEMPORAL if temporal else "")
    if any(name.endswith("embed_tokens.weight") for name in names):
        return FileKind("text encoder", None, "a Gemma language model")
    release = None if config else released_vae_release(file)  # a 2.0 / 2.3 VAE file without its metadata
    if release is not None:
        return FileKind("video VAE", release, CONV_DECODER)
    return FileKind("unknown", version, "no LTX-2 config metadata or tensor names")


def _audio_vae_release(config: Mapping) -> str | None:
    """A split audio VAE's release by its vocoder: LTX-2.0's is a flat HiFi-GAN section; 2.3's and 2.5's add the
    bandwidth extension (`vocoder` + `bwe`) in one form, which only a `model_version` tells apart."""
    vocoder = config.get("vocoder")
    return "2.0" if isinstance(vocoder, dict) and vocoder and "bwe" not in vocoder else None


def _upsampler_release(config: Mapping) -> str | None:
    """An upsampler's release by its form: of the released x2 files, LTX-2.0's (x2-1.0) alone uses the rational
    resampler, 2.3's (x2-1.1) and 2.5's the plain one, which only a `model_version` tells apart."""
    rational = config.get("rational_resampler") is True and config.get("spatial_scale", 2.0) == 2
    return "2.0" if rational else None


def release_of(model_version: str | None) -> str | None:
    """'2.5' from a `model_version` such as '2.5.0' or '2.5-rc1'; None when absent or unreadable."""
    match = _VERSION.match(model_version or "")
    return f"{match.group(1)}.{match.group(2)}" if match else None


def check_file_kind(path: str | os.PathLike, kind: str, loader: str | None = None) -> FileKind:
    """The file's kind, or CheckpointError when it is not a `kind` file: what it is, and where it belongs (the
    ComfyUI folder, and `loader`'s name when given, the node that takes this kind)."""
    found = file_kind(path)
    if found.kind != kind and not (kind in ("transformer", "text projection") and found.kind == "checkpoint"):
        where = f"the {found.folder} folder" if found.folder else "no LTX-2 loader"
        raise CheckpointError(
            f"{path}: this is {found.describe()}, not {FileKind(kind).describe()}; it belongs in {where}. "
            f"Pick {FileKind(kind).describe()} here{f' ({loader})' if loader else ''}, from the "
            f"{FOLDERS.get(kind, 'matching')} folder.")
    return found


def check_same_release(files: Mapping[str, FileKind]) -> str | None:
    """The one release named by the files (label -> kind), or None when none names one; CheckpointError listing
    every file with its release when two differ (e.g. an LTX-2.3 checkpoint with an LTX-2.5 text encoder)."""
    versions = {label: kind.version for label, kind in files.items() if kind.version}
    if len(set(versions.values())) > 1:
        listing = "; ".join(f"{label}: {files[label].describe()}" for label in versions)
        raise CheckpointError(f"these files belong to different LTX-2 releases ({listing}); pick every file of one "
                              "release (its transformer or checkpoint, text encoder, VAEs, upsampler and LoRAs)")
    return next(iter(versions.values()), None)


def _text_encoder(file: SafetensorsFile) -> FileKind:
    raw = file.metadata.get("gemma_config")
    if raw is None:  # ComfyUI's single-file Gemma 3 (SentencePiece model as a tensor, no config)
        return FileKind("text encoder", None, "Gemma 3")
    try:
        config = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{file.path}: the 'gemma_config' metadata is not valid JSON ({exc})") from exc
    model_type = str(config.get("model_type", "")) if isinstance(config, dict) else ""
    detail = f"Gemma ({model_type})" if model_type else "Gemma"
    return FileKind("text encoder", _GEMMA_RELEASE.get(model_type), detail)


def _config(file: SafetensorsFile) -> dict:
    raw = file.metadata.get("config")
    if raw is None:
        return {}
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{file.path}: the 'config' metadata is not valid JSON ({exc})") from exc
    return parsed if isinstance(parsed, dict) else {}
