"""The parallelism widget's logic tests (tests/web/*.test.mjs) under Node's own test runner."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_node_test_runner_passes():
    run = subprocess.run(["node", "--test", *map(str, sorted(HERE.glob("*.test.mjs")))], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout and "# pass 0" not in run.stdout
