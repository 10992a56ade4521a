"""CFG-parallel over real torch.distributed ranks (gloo, CPU, one process per rank): the guidance passes are split
over the ranks and one all-gather per step gives every rank the single-process result."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

RANK_SCRIPT = Path(__file__).with_name("cfg_rank.py")


def run_ranks(world: int, guidance: str, tmp_path: Path) -> list[dict]:
    init = tmp_path / "init"
    outs = [tmp_path / f"rank{rank}.json" for rank in range(world)]
    procs = [subprocess.Popen([sys.executable, str(RANK_SCRIPT), str(rank), str(world), str(init), guidance,
                               str(outs[rank])], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank in range(world)]
    logs = []
    for proc in procs:
        try:
            logs.append(proc.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            pytest.fail("a rank hung")
    assert all(proc.returncode == 0 for proc in procs), "\n".join(logs)[-4000:]
    return [json.loads(out.read_text()) for out in outs]


@pytest.mark.parametrize("guidance, shares", [
    ("full", [["cond", "uncond"], ["perturbed", "isolated"]]),
    ("three", [["cond", "uncond"], ["perturbed"]]),  # uneven shares: the gather pads and drops a row
])
def test_cfg2_equals_one_process_with_one_gather_per_step(tmp_path, guidance, shares):
    results = run_ranks(2, guidance, tmp_path)
    assert [r["local_passes"] for r in results] == shares
    for result in results:
        assert result["diff"] <= 1e-4, result  # a 3-step guided run, fp32
        assert sum(result["collectives"].values()) == 1 and "all_gather" in next(iter(result["collectives"]))
