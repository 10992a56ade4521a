"""README keeps exactly two set-up commands; CI runs the test one; the main job works."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), flags=re.S)


def test_readme_has_the_two_commands_and_ci_runs_the_test_one():
    run_cmd, test_cmd = _commands()
    assert run_cmd.endswith("python -m ltx2_core")
    assert test_cmd.endswith("python -m pytest")
    assert test_cmd in (ROOT / ".ci" / "run").read_text()


def test_requirements_leave_torch_unpinned():
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert "torch" in lines


def test_main_job_runs_the_demo_forward():
    out = subprocess.run([sys.executable, "-m", "ltx2_core", "--version", "2.3"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "velocity (2, 18, 128)" in out.stdout and "LTX-2.3 structure" in out.stdout
    assert "positive + negative in one Gemma pass" in out.stdout


def test_main_job_rejects_bad_sizes_early():
    out = subprocess.run([sys.executable, "-m", "ltx2_core", "--frames", "16"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 2 and "8k+1" in out.stderr
