"""Loading the spatial latent upsampler from its own safetensors file (spec §5, §8).

The file has no key prefix and a flat `config` metadata entry. Its optional `upsampler.blur_down.kernel` is a
constant the model recomputes (a non-persistent buffer), so the key is checked against the binomial and dropped.
"""

from __future__ import annotations

import os

import torch

from ltx2_core.errors import CheckpointError, ConfigError, MissingConfigError
from ltx2_core.loader.checkpoint import config_metadata
from ltx2_core.loader.components import load_module
from ltx2_core.loader.safetensors_file import SafetensorsFile, read_header, read_tensors
from ltx2_core.loader.sources import Component, Source, component_source
from ltx2_core.model.upsampler import LatentUpsampler, UpsamplerConfig, binomial_kernel

UPSAMPLER_FILES = "ltx-2-spatial-upscaler-x2-1.0.safetensors (LTX-2.0) or ltx-2.3-spatial-upscaler-x2-1.1.safetensors"
# not public yet: DFR's temporal x2 upsampler, a flat `config` with temporal_upsample true and spatial_upsample false
TEMPORAL_UPSAMPLER_FILE = "the temporal x2 latent upsampler of DFR (config temporal_upsample: true)"
# the model sections of a full LTX-2 checkpoint's config, which an upsampler file never has
_MODEL_SECTIONS = ("transformer", "vae", "audio_vae", "vocoder")


def upsampler_config(file: SafetensorsFile) -> UpsamplerConfig:
    """The file's flat `config` metadata as an UpsamplerConfig; errors name the file and the file to use."""
    if "config" not in file.metadata:
        raise MissingConfigError(f"{file.path}: no 'config' metadata, so the latent upsampler's shape is unknown; "
                                 f"use the official {UPSAMPLER_FILES} (they carry it)")
    flat = config_metadata(file)
    sections = [s for s in _MODEL_SECTIONS if s in flat]
    if sections:
        raise CheckpointError(
            f"{file.path} is an LTX-2 model checkpoint, not a latent upsampler (its config has the "
            f"{', '.join(sections)} sections); pass the spatial upscaler file instead: {UPSAMPLER_FILES}"
        )
    try:
        return UpsamplerConfig.from_metadata(flat)
    except ConfigError as exc:
        raise type(exc)(f"{file.path}: {exc}") from exc


def check_direction(config: UpsamplerConfig, temporal: bool, label: str) -> None:
    """ConfigError naming the fix when a spatial upsampler is given where the temporal one belongs, or the reverse."""
    if config.temporal == temporal:
        return
    if temporal:
        raise ConfigError(f"{label} is a spatial latent upsampler (it enlarges H and W), not the temporal one that "
                          f"doubles the frames; give it as --upsampler and pass {TEMPORAL_UPSAMPLER_FILE} here")
    raise ConfigError(f"{label} is a temporal latent upsampler (it doubles the frames), not a spatial one; give it "
                      f"as --temporal-upsampler and pass the spatial upscaler here: {UPSAMPLER_FILES}")


def upsampler_keys(file: SafetensorsFile, model: LatentUpsampler, prefix: str = "") -> dict[str, str]:
    """Model key -> file key (the model's names under `prefix`, "" in the released files), without the recomputed
    buffers the file may also hold."""
    recomputed = {name for name, _ in model.named_buffers()} - set(model.state_dict())
    for name in sorted(recomputed):
        if prefix + name in file.tensors:
            _check_kernel(file, prefix + name)
    return {name[len(prefix):]: name for name in file.tensors
            if name.startswith(prefix) and name[len(prefix):] not in recomputed}


def _check_kernel(file: SafetensorsFile, name: str) -> None:
    """A stored blur kernel must be the binomial the model recomputes; anything else means other weights."""
    expected = binomial_kernel()
    shape = tuple(file.tensors[name].shape)
    # the shape is compared first so that a mislabelled large tensor is never read
    if shape != tuple(expected.shape) or not torch.allclose(
        read_tensors(file, {name: name})[name].float(), expected, rtol=0, atol=1e-6
    ):
        raise CheckpointError(
            f"{file.path}: {name!r} of shape {list(shape)} is not the normalised {list(expected.shape)[2:]} "
            f"binomial blur this upsampler uses; the file is from another model or damaged. Use the official "
            f"{UPSAMPLER_FILES}"
        )


def load_upsampler(
    path: str | os.PathLike | Source, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None,
    temporal: bool | None = False,
) -> LatentUpsampler:
    """The latent upsampler of `path` (its file, or a `Source`), in eval mode on `device`; `dtype` (e.g.
    torch.bfloat16) casts the weights. `temporal`: the frame-doubling upsampler is wanted (ConfigError naming the fix
    for a file of the other direction); None: either, as its header says (`config.temporal`).

    Format, config, key set and shapes are checked before any weight is read.
    """
    source = component_source(path, Component.UPSAMPLER)
    file = read_header(source.path, "latent upsampler")
    config = upsampler_config(file)
    if temporal is not None:
        check_direction(config, temporal, str(file.path))
    with torch.device("meta"):
        model = LatentUpsampler(config)
    keys = upsampler_keys(file, model, source.prefix)
    return load_module(file, model, keys, "latent upsampler", device=device, dtype=dtype)
