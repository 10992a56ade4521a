"""The headless client's exit status when nothing answers at --server: its own code, not the validation error's."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "tools" / "ltx2_client.py"
WORKFLOW = ROOT / "example_workflows" / "api" / "ltx2_t2v_one_stage.api.json"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when this returns: nothing listens there


def test_an_unreachable_server_exits_5_and_says_so():
    run = subprocess.run([sys.executable, str(CLIENT), str(WORKFLOW), "--server",
                          f"http://127.0.0.1:{_closed_port()}"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 5, run.stderr
    assert "cannot reach ComfyUI" in run.stderr
    assert "5 server unreachable" in subprocess.run([sys.executable, str(CLIENT), "--help"], capture_output=True,
                                                    text=True, timeout=60).stdout


def test_a_bad_setting_is_still_a_validation_error():
    run = subprocess.run([sys.executable, str(CLIENT), str(WORKFLOW), "--set", "nosuchinput=1"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
