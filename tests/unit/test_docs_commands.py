"""Every command the README and the docs show stays runnable: each shell command in a code block names options its
program has (the generate command's arguments parse with its own parser; a script's options appear in its
`--help`), the repository files it names exist, and each Python block compiles and imports only names that exist.
The two set-up commands of the README are run by CI itself (tests/unit/test_repository.py)."""

from __future__ import annotations

import ast
import importlib
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from ltx2_core.cli_args import parser

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"```(\w*)\n(.*?)\n```", re.S)
REPOSITORY_PATHS = ("example_workflows/", "tools/", "bench/", "docs/", "tests/")


def _blocks(language: str | None = None) -> list[tuple[str, str, str]]:
    """(page, language, text) of every fenced block."""
    found = []
    for page in PAGES:
        for lang, text in BLOCK.findall(page.read_text()):
            if language is None or lang == language:
                found.append((page.relative_to(ROOT).as_posix(), lang, text))
    return found


def _commands() -> list[tuple[str, list[str]]]:
    """(page, argv) of every shell command in a non-Python block (continued lines joined, comments dropped)."""
    commands = []
    for page, lang, text in _blocks():
        if lang == "python":
            continue
        for line in text.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if not line or line.startswith(("#", "export ")):
                continue
            for part in line.split("&&"):
                commands.append((page, shlex.split(part)))
    return commands


def _programs(argv: list[str]) -> tuple[str, list[str]] | None:
    """(program, its arguments) of a command: "generate" for the generate command (also under torchrun), the module
    or script path otherwise; None for what this test does not run (pip, pytest: CI runs those)."""
    if argv[0] not in ("python", "python3", "torchrun"):
        return None
    if "-m" in argv:
        module, rest = argv[argv.index("-m") + 1], argv[argv.index("-m") + 2:]
        if module == "ltx2_core":
            assert rest[:1] == ["generate"], f"{' '.join(argv)}: the command is `python -m ltx2_core generate`"
            return "generate", rest[1:]
        return None if module in ("pip", "pytest") else (module, rest)
    return argv[1], argv[2:]


@cache
def _help(program: str) -> str:
    command = [sys.executable, "-m", program] if not program.endswith(".py") else [sys.executable, program]
    done = subprocess.run([*command, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{program} --help failed:\n{done.stderr[-2000:]}"
    return done.stdout


COMMANDS = [(page, argv) for page, argv in _commands() if _programs(argv)]


def test_the_pages_show_commands():
    assert {page for page, _ in COMMANDS} >= {"README.md", "docs/command_line.md", "docs/several_gpus.md"}


@pytest.mark.parametrize("page, argv", COMMANDS, ids=[f"{p}:{' '.join(a)[:60]}" for p, a in COMMANDS])
def test_each_command_names_what_exists(page, argv):
    program, arguments = _programs(argv)
    for word in arguments:
        if word.startswith(REPOSITORY_PATHS):
            assert (ROOT / word).exists(), f"{page}: {word} does not exist"
    if program == "generate":
        parser().parse_args(arguments)  # an unknown option or a bad value exits (SystemExit fails the test)
        return
    if program.endswith(".py"):
        assert (ROOT / program).is_file(), f"{page}: {program} does not exist"
    text = _help(program)
    for option in (word.split("=")[0] for word in arguments if word.startswith("--")):
        assert option in text, f"{page}: {program} has no option {option}"


PYTHON = _blocks("python")


@pytest.mark.parametrize("page, lang, text", PYTHON, ids=[f"{p}:{i}" for i, (p, _, _) in enumerate(PYTHON)])
def test_each_python_block_compiles_and_imports_what_exists(page, lang, text):
    tree = ast.parse(text)  # a syntax error fails here
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ltx2_core":
            module = importlib.import_module(node.module)
            missing = [alias.name for alias in node.names if not hasattr(module, alias.name)]
            assert not missing, f"{page}: {node.module} has no {missing}"
