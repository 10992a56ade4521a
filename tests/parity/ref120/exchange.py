"""The reference side of tests/support/reference120.py: a 1.2.0 script's inputs, settings and outputs."""

from __future__ import annotations

import json
import sys

import torch
from safetensors.torch import load_file, save_file


def inputs() -> tuple[dict[str, torch.Tensor], dict]:
    """The tensors and the settings the test sent (argv[1], argv[2])."""
    torch.set_grad_enabled(False)
    torch.manual_seed(0)
    return load_file(sys.argv[1]), json.loads(open(sys.argv[2]).read())


def outputs(tensors: dict[str, torch.Tensor]) -> None:
    """Writes what the test reads back (argv[3])."""
    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, sys.argv[3])
