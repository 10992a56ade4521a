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


TORCH_PIN = "torch==2.13.0"  # the local CPU build; any other torch version would pull gigabytes of CUDA packages
_TORCH_SPEC = re.compile(r"(?<![\w-])torch\s*(?:===?|>=|<=|~=|!=|<|>)\s*[\w.*+!-]+")
_TEXT_SUFFIXES = {".txt", ".toml", ".cfg", ".ini", ".md", ".sh", ".yml", ".yaml", ".json", ""}


def _repository_files(root: Path) -> list[Path]:
    """The files git tracks under `root` (never a virtualenv or other installs inside the checkout); outside a git
    checkout, every file but those of .git, node_modules and virtualenvs (folders holding a pyvenv.cfg)."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True)
    if listed.returncode == 0 and (root / ".git").exists():
        return sorted(root / name for name in listed.stdout.decode().split("\0") if name)
    skipped = {path.parent for path in root.rglob("pyvenv.cfg")}
    return sorted(path for path in root.rglob("*") if path.is_file() and
                  path.relative_to(root).parts[0] not in (".git", "node_modules") and
                  not any(folder in path.parents for folder in skipped))


def _torch_specifiers(root: Path = ROOT) -> dict[str, list[str]]:
    """Every torch version specifier in the non-Python text files of the repository at `root`, by file."""
    found = {}
    for path in _repository_files(root):
        if not path.is_file() or path.suffix not in _TEXT_SUFFIXES:
            continue
        specs = [m.group(0).replace(" ", "") for m in _TORCH_SPEC.finditer(path.read_text(errors="ignore"))]
        if specs:
            found[path.relative_to(root).as_posix()] = specs
    return found


def test_torch_is_pinned_once_and_only_in_the_commands():
    """requirements.txt leaves torch bare (ComfyUI brings its own build); the only pin is the CPU build of the two
    README commands, which .ci/run repeats."""
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert "torch" in lines
    found = _torch_specifiers()
    assert {spec for specs in found.values() for spec in specs} == {TORCH_PIN}, found
    assert set(found) == {"README.md", ".ci/run"}, found


def test_the_torch_pin_check_sees_a_second_pin(tmp_path):
    """The check above can fail: a second pin in a requirements file is found."""
    (tmp_path / "requirements.txt").write_text("torch\n")
    (tmp_path / "README.md").write_text(f"pip install {TORCH_PIN}\n")
    (tmp_path / "extra.txt").write_text("torch >= 2.4\n")
    assert _torch_specifiers(tmp_path) == {"README.md": [TORCH_PIN], "extra.txt": ["torch>=2.4"]}


def _virtualenv_naming_torch(root: Path) -> None:
    """What `python -m venv .venv` and an install of a package that needs torch leave inside a checkout."""
    (root / ".venv").mkdir()
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    dist = root / ".venv" / "lib" / "python3.11" / "site-packages" / "accelerate-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Name: accelerate\nRequires-Dist: torch>=2.0.0\n")


def test_the_torch_pin_check_skips_a_virtualenv_inside_the_checkout(tmp_path):
    (tmp_path / "README.md").write_text(f"pip install {TORCH_PIN}\n")
    _virtualenv_naming_torch(tmp_path)
    assert _torch_specifiers(tmp_path) == {"README.md": [TORCH_PIN]}  # not a git checkout: virtualenvs skipped
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "README.md"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    (tmp_path / "notes.txt").write_text("torch==1.0\n")  # untracked: not part of the repository
    assert _torch_specifiers(tmp_path) == {"README.md": [TORCH_PIN]}  # a git checkout: tracked files only


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


def test_tests_that_run_the_reference_are_parity_tests():
    """`unit/` tests stand alone; a test that imports the reference `ltx_core` compares against it: `parity/`."""
    reference = re.compile(r"\b(import_ltx_core|from ltx_core|import ltx_core|ltx_pipelines)\b")
    files = [path for path in sorted((ROOT / "tests" / "unit").glob("*.py")) if path.name != Path(__file__).name]
    assert [path.name for path in files if reference.search(path.read_text())] == []
