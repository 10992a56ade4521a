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


def test_the_widgets_weights_per_gpu_are_the_memory_plans_bytes_of_each_release():
    """The widget cannot import Python: its bf16 transformer bytes per release are the memory plan's count of the
    released configs (to the 0.01 GB it states them in)."""
    import re

    import torch

    from ltx2_core.memory.plan import transformer_weight_bytes
    from support.configs import released_transformer_configs

    widget = (HERE.parents[1] / "web" / "ltx2_parallel.js").read_text()
    stated = {version: float(value) for version, value in re.findall(r'"LTX-(2(?:\.\d)?) \d+B": ([\d.e]+)', widget)}
    assert set(stated) == {"2", "2.3", "2.5"}
    for version, config in released_transformer_configs().items():
        weights = transformer_weight_bytes(config, torch.bfloat16)
        total = weights.non_block + weights.blocks * weights.per_block
        assert abs(stated["2" if version == "2.0" else version] - total) < 0.01e9, version
