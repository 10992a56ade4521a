"""Access to the reference implementation `ltx_core` (PyPI ltx-core==1.0.0, installed with --no-deps).

torchaudio has no CPU build on the package registry used here; ltx_core imports it only for the audio *encoder*'s
mel front-end, so an inert stand-in is registered when the real one is missing.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types

import pytest
import torch


def _stub_torchaudio() -> None:
    if importlib.util.find_spec("torchaudio") is not None or "torchaudio" in sys.modules:
        return
    stub = types.ModuleType("torchaudio")
    stub.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
    stub.transforms = types.SimpleNamespace(MelSpectrogram=None)
    stub.functional = types.SimpleNamespace(resample=None)
    sys.modules["torchaudio"] = stub


def import_ltx_core():
    """Imports ltx_core or fails the test with the install command (it is a required test dependency)."""
    _stub_torchaudio()
    try:
        import ltx_core  # noqa: F401
    except ImportError as exc:  # pragma: no cover - a broken environment, not a test outcome
        pytest.fail(f"the reference ltx_core is missing ({exc}); run: pip install --no-deps ltx-core==1.0.0")
    import ltx_core

    return ltx_core


def reference_transformer(state_dict: dict[str, torch.Tensor], transformer_section: dict) -> torch.nn.Module:
    """The reference LTXModel built from the same metadata section, holding the same weights (strict load)."""
    import_ltx_core()
    from ltx_core.model.transformer import LTXModelConfigurator

    with torch.device("meta"):
        model = LTXModelConfigurator.from_config({"transformer": transformer_section})
    model.load_state_dict(state_dict, strict=True, assign=True)
    return model.eval()
