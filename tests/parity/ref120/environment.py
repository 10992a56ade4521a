"""Reports which reference this Python imports: ltx_core's version and where it lives, and whether the audio VAE
(which needs torchaudio) and the Gemma 4 text encoder import."""

import importlib.metadata

import torch
from exchange import inputs, outputs

tensors, _ = inputs()
import ltx_core  # noqa: E402
import ltx_core.model.audio_vae  # noqa: E402,F401
import ltx_core.text_encoders.gemma  # noqa: E402,F401

version = tuple(int(p) for p in importlib.metadata.version("ltx-core").split("."))
outputs({"version": torch.tensor(version), "echo": tensors["x"] * 2})
