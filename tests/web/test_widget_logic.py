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


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_the_widgets_default_layout_is_the_one_the_pack_picks_for_auto(tmp_path):
    """The widget's "default layout" (fastestPredicted over GET /ltx2/layout_times) and the node's `auto`
    (choose.fastest_layout) pick the same layout for every GPU count, guidance passes and memory need; where no
    layout of that many GPUs fits the heads and passes (5 or 7 GPUs) both fall back to the rule (null here)."""
    import json

    from ltx2_core.parallel.choose import fastest_layout, fit_tp
    from ltx2_core.parallel.cost_model import layouts
    from nodes.parallel import layout_times

    names, cases = ["NVIDIA H200"] * 8, []
    predicted = layout_times({"gpus": "8", "name": names[0]})
    for devices in range(1, 9):
        for passes in range(1, 5):
            for free in (140e9, 30e9, 12e9):
                python, tp = fastest_layout(devices, passes, 37e9, free, names[:devices]), fit_tp(devices, 37e9, free)
                modelled = any(c.tp >= tp for c in layouts(devices, passes))
                cases.append({"devices": devices, "passes": passes, "minTp": tp,
                              "python": [python.cfg, python.sp, python.tp] if modelled else None})
    script = tmp_path / "check.mjs"
    script.write_text(f"""
import {{ fastestPredicted }} from "{(HERE.parents[1] / "web" / "ltx2_parallel_logic.js").as_posix()}";
const predicted = {json.dumps(predicted)}, cases = {json.dumps(cases)};
console.log(JSON.stringify(cases.map((c) => {{
  const l = fastestPredicted(predicted, c.devices, c.passes, c.minTp);
  return l && [l.cfg, l.sp, l.tp];
}})));""")
    run = subprocess.run(["node", str(script)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == [c["python"] for c in cases]
    assert sum(c["python"] is None for c in cases) < len(cases) // 2  # most cases pick by the model
