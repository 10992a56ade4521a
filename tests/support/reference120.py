"""The newest reference, ltx-core / ltx-pipelines 1.2.0 (LTX-2.5), run in a second Python beside the tests.

1.2.0 is not on PyPI and uses the package names of 1.0.0, which the main test environment keeps. `.ci/run` installs
the two shared wheels (../shared/reference/) with `pip install --no-deps --target DIR` and exports
`LTX2_REFERENCE_120=DIR`; a reference script then runs under `LTX2_REFERENCE_120_PYTHON` (default: the shared
ComfyUI's Python, `COMFYUI_PYTHON`, whose torchaudio the reference's audio VAE needs; else this Python) with DIR first
on its path. Tensors travel both ways as safetensors files, settings as JSON.

A script of tests/parity/ref120/ reads `argv[1]` (inputs, .safetensors) and `argv[2]` (settings, .json) and writes
`argv[3]` (outputs, .safetensors); `tests/parity/ref120/exchange.py` has the two halves of that.
Without the variable the parity tests of 2.5 skip, except under CI, where they fail: CI must run them.

`run_reference(..., version="1.0.0")` runs a script of tests/parity/ref100/ the same way under ltx-core /
ltx-pipelines 1.0.0 installed into `LTX2_REFERENCE_100` (`.ci/run` installs them from PyPI with `--target`): the
1.0.0 pipelines import the audio VAE, which needs the torchaudio of the shared ComfyUI's Python, so a pipeline's own
`__call__` runs there, not in this Python (whose 1.0.0 serves the in-process parity tests).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

PARITY = Path(__file__).resolve().parents[1] / "parity"
SCRIPTS = PARITY / "ref120"
ENV, PYTHON_ENV = "LTX2_REFERENCE_120", "LTX2_REFERENCE_120_PYTHON"
# version -> (the folder of its scripts, the variable naming where it is installed, what installs it)
VERSIONS = {"1.2.0": (SCRIPTS, ENV, "../shared/reference/*.whl"),
            "1.0.0": (PARITY / "ref100", "LTX2_REFERENCE_100", "ltx-core==1.0.0 ltx-pipelines==1.0.0")}


def reference_python(version: str = "1.2.0") -> tuple[str, Path]:
    """The Python that runs the reference `version` and the folder holding it, or a skip (a failure under CI)."""
    _, env, wheels = VERSIONS[version]
    folder = os.environ.get(env)
    if not folder or not (Path(folder) / "ltx_core").is_dir():
        message = (f"the ltx-core {version} reference is not installed: pip install --no-deps --target DIR "
                   f"{wheels}, then set {env}=DIR (.ci/run does this)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    python = os.environ.get(PYTHON_ENV) or os.environ.get("COMFYUI_PYTHON") or sys.executable
    return python, Path(folder)


def run_reference(script: str, inputs: dict[str, torch.Tensor], settings: dict | None = None,
                  tmp_path: Path | None = None, timeout: float = 600,
                  version: str = "1.2.0") -> dict[str, torch.Tensor]:
    """Runs tests/parity/ref120/`script` (ref100/ for `version` 1.0.0) under that reference on `inputs` (CPU
    tensors) and returns its outputs."""
    python, folder = reference_python(version)
    scripts = VERSIONS[version][0]
    work = Path(tmp_path) if tmp_path is not None else Path(os.environ.get("TMPDIR", "/tmp"))
    stem = work / f"ref{version.replace('.', '')}-{Path(script).stem}-{os.getpid()}"
    paths = [stem.with_suffix(".in.safetensors"), stem.with_suffix(".json"), stem.with_suffix(".out.safetensors")]
    save_file({k: v.detach().cpu().contiguous() for k, v in inputs.items()}, str(paths[0]))
    paths[1].write_text(json.dumps(settings or {}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder), str(scripts), str(SCRIPTS)]),
               PYTHONNOUSERSITE="1")
    done = subprocess.run([python, str(scripts / script), *map(str, paths)], env=env, capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode != 0:
        pytest.fail(f"the {version} reference script {script} failed:\n{(done.stdout + done.stderr)[-6000:]}")
    try:
        return load_file(str(paths[2]))
    finally:
        for path in paths:
            path.unlink(missing_ok=True)
