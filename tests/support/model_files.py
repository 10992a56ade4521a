"""Small model files of the kinds a user drops into ComfyUI's folders: an x2 upsampler and a LoRA for the tiny
transformers, a bundle's VAEs saved out as files of their own, written as real safetensors in the official layouts;
and a header-only file of full-size tensors (a sparse file) for the checks that read headers only."""

from __future__ import annotations

import json
import math
import struct
from dataclasses import replace
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import save_file

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_lora, demo_transformer, demo_upsampler
from ltx2_core.model.upsampler import LatentUpsampler, binomial_kernel


def write_upsampler(path: Path, version: str = "2.0", seed: int = 3) -> Path:
    """The demo's x2 upsampler with its `config` metadata; a rational resampler's file also holds its blur kernel,
    as the released one does (ltx-core reads it from the file; we rebuild it)."""
    upsampler = demo_upsampler(version, seed=seed)
    tensors = {k: v.contiguous() for k, v in upsampler.state_dict().items()}
    if upsampler.config.rational_resampler:
        tensors["upsampler.blur_down.kernel"] = binomial_kernel()
    save_file(tensors, str(path), metadata={"config": json.dumps(upsampler.config.to_metadata())})
    return path


def write_temporal_upsampler(path: Path, seed: int = 5) -> Path:
    """DFR's temporal x2 upsampler (not public yet) in the spatial files' layout: no key prefix, a flat `config` with
    `temporal_upsample` true and `spatial_upsample` false, for 128-channel latents, random weights."""
    import torch

    config = replace(demo_upsampler("2.5").config, rational_resampler=False, temporal=True)
    upsampler = LatentUpsampler(config)
    generator = torch.Generator().manual_seed(seed)
    tensors = {k: torch.randn(v.shape, generator=generator) * 0.05 for k, v in upsampler.state_dict().items()}
    save_file(tensors, str(path), metadata={"config": json.dumps(config.to_metadata())})
    return path


def write_lora(path: Path, seed: int, version: str = "2.0", metadata: dict[str, str] | None = None) -> Path:
    """A random LoRA on every block linear of the tiny transformer, in ComfyUI's layout (`diffusion_model.` +
    lora_A / lora_B), with the file metadata `metadata` (an IC-LoRA's reference_downscale_factor, ...)."""
    lora = demo_lora(demo_transformer(TransformerConfig.tiny(version)), seed=seed)
    tensors = {}
    for target, pair in lora.pairs.items():
        stem = "diffusion_model." + target[: -len(".weight")]
        tensors[stem + ".lora_A.weight"], tensors[stem + ".lora_B.weight"] = pair.down, pair.up
    save_file(tensors, str(path), metadata=metadata)
    return path


def write_split_vaes(bundle: Path, folder: Path) -> tuple[Path, Path]:
    """The video VAE and the audio VAE + vocoder of a 2.0 / 2.3 bundle saved out as files of their own, as users
    split them (ComfyUI's LTX2*_video_vae / audio_vae files): the bundle's keys and each file's `config` sections,
    no `model_version`. Returns (video VAE, audio VAE)."""
    with safe_open(str(bundle), "pt") as f:
        sections = json.loads(f.metadata()["config"])
        tensors = {name: f.get_tensor(name) for name in f.keys()}
    paths = (folder / f"{bundle.stem}-video-vae.safetensors", folder / f"{bundle.stem}-audio-vae.safetensors")
    for path, prefixes, names in ((paths[0], ("vae.",), ("vae",)),
                                  (paths[1], ("audio_vae.", "vocoder."), ("audio_vae", "vocoder"))):
        save_file({k: v for k, v in tensors.items() if k.startswith(prefixes)}, str(path),
                  metadata={"config": json.dumps({name: sections[name] for name in names})})
    return paths


def write_header_only(path: Path, shapes: dict[str, tuple[int, ...]], metadata: dict[str, str] | None = None) -> Path:
    """A safetensors file of full-size bf16 tensors whose data is a hole (a sparse file: no disk space, zeros when
    read): its header is a released file's, for the checks that read headers only."""
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = 2 * math.prod(shape)
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    if metadata:
        header["__metadata__"] = metadata
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + offset)
    return path
