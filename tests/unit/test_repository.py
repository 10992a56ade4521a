"""README keeps exactly two set-up commands; CI runs the test one; the main job works."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import av

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), flags=re.S)


def test_readme_has_the_two_commands_and_ci_runs_the_test_one():
    run_cmd, test_cmd = _commands()
    assert run_cmd.endswith("python -m ltx2_core generate")
    assert test_cmd.endswith("python -m pytest")
    assert test_cmd in (ROOT / ".ci" / "run").read_text()


def test_requirements_leave_torch_unpinned():
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert "torch" in lines


def test_main_job_runs_the_demo_and_writes_an_mp4_with_audio(tmp_path):
    output = tmp_path / "demo.mp4"
    out = subprocess.run([sys.executable, "-m", "ltx2_core", "generate", "--version", "2.3", "--steps", "4",
                          "--output", str(output)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "random-weight DEMO model (LTX-2.3 structure" in out.stdout
    assert "denoise: 100%" in out.stderr and "4/4" in out.stderr  # the progress bar
    with av.open(str(output)) as container:
        video, audio = container.streams.video[0], container.streams.audio[0]
        assert (video.frames, video.average_rate, video.width, video.height) == (17, 24, 96, 64)
        assert (audio.rate, audio.channels) == (48000, 2)


def test_main_job_rejects_bad_sizes_early(tmp_path):
    output = tmp_path / "bad.mp4"
    for flags, message in ((["--frames", "16"], "8k+1"), (["--output", str(tmp_path / "no" / "x.mp4")], "folder")):
        out = subprocess.run([sys.executable, "-m", "ltx2_core", "--output", str(output), *flags], cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 2 and message in out.stderr
        assert "model:" not in out.stdout  # nothing ran
    assert not output.exists()
