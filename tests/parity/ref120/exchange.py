"""The reference side of tests/support/reference120.py: a 1.2.0 script's inputs, settings and outputs."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from dataclasses import replace

import torch
from safetensors.torch import load_file, save_file


def _stub_image_io() -> None:
    """ltx_pipelines 1.2.0 imports OpenImageIO for its image/EXR files (not on PyPI for this Python); nothing a
    parity script calls reads a file with it, so an empty module stands in where it is missing."""
    if importlib.util.find_spec("OpenImageIO") is None and "OpenImageIO" not in sys.modules:
        sys.modules["OpenImageIO"] = types.ModuleType("OpenImageIO")


_stub_image_io()


def inputs() -> tuple[dict[str, torch.Tensor], dict]:
    """The tensors and the settings the test sent (argv[1], argv[2])."""
    torch.set_grad_enabled(False)
    torch.manual_seed(0)
    return load_file(sys.argv[1]), json.loads(open(sys.argv[2]).read())


def outputs(tensors: dict[str, torch.Tensor]) -> None:
    """Writes what the test reads back (argv[3])."""
    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, sys.argv[3])


class TensorNoiser:
    """GaussianNoiser's blend with the given noise (1, tokens, C) instead of a draw (the test sends the noise our
    side drew, so both start from the same state)."""

    def __init__(self, noise: torch.Tensor) -> None:
        self.noise = noise

    def __call__(self, state, noise_scale: float = 1.0):
        latent = torch.lerp(state.latent.float(), self.noise.float(), noise_scale)
        latent = torch.lerp(state.clean_latent.float(), latent, state.denoise_mask)
        return replace(state, latent=latent.to(state.latent.dtype))


def guider_params(params: dict):
    """The reference's MultiModalGuiderParams of the test's guidance settings (cfg, stg, stg_blocks, rescale,
    modality); 1.0.0 and 1.2.0 name them alike."""
    from ltx_core.components.guiders import MultiModalGuiderParams

    return MultiModalGuiderParams(cfg_scale=params["cfg"], stg_scale=params["stg"], stg_blocks=params["stg_blocks"],
                                  rescale_scale=params["rescale"], modality_scale=params["modality"])


def guider(params: dict, negative: torch.Tensor):
    """1.2.0's MultiModalGuider of the test's guidance settings with the negative context."""
    from ltx_core.components.guiders import MultiModalGuider

    return MultiModalGuider(guider_params(params), negative_context=negative)


class Float32Torch(types.ModuleType):
    """torch as a reference pipeline module sees it once assigned to its `torch`, with bfloat16 meaning float32 (the
    pipelines hard-code bf16; the parity runs in fp32)."""

    bfloat16 = torch.float32

    def __getattr__(self, name):
        return getattr(torch, name)
