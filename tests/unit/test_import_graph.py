"""The rooms of ltx2_core (docs/architecture.md): each module imports only from its own room or lower ones, and the
import graph has no circle. Every import counts, also those inside functions or under TYPE_CHECKING: a lazy import
is still a dependency, and a circle through one breaks as soon as someone moves it to the top."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "ltx2_core"

# lowest first; a module belongs to the room of its longest matching prefix ("" is the package's __init__)
ROOMS = (
    ("base values", ("errors", "types", "geometry", "releases", "finite", "media", "audio_io", "video_io")),
    ("models", ("model",)),
    ("file reader", ("loader.safetensors_file",)),
    ("quantised formats", ("quant",)),
    ("loaders", ("loader",)),
    ("memory", ("memory",)),
    ("conditions and sampling", ("conditioning", "sampling")),
    ("stages", ("compile", "preview", "stages", "hdr", "exr", "tiled_stage")),
    ("pipelines", ("pipeline", "request", "request_checks", "request_models", "request_encoding", "stage_samplers",
                   "windows", "long_video", "hdr_pipeline", "dfr", "dfr_layout", "dfr_pipeline", "duration")),
    ("demo", ("demo",)),
    ("assembly", ("model_files", "model_file_checks", "parallel")),
    ("hosts", ("hosts", "runtime")),
    ("entry points", ("__main__", "cli_args", "cli_values", "cli_request", "cli_checks", "")),
)


def _modules() -> dict[str, Path]:
    """Module names relative to the package ("" for its __init__, "model.text" for a subpackage)."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules `path` imports (a `from pkg import sub` names the submodule `sub`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "ltx2_core":
            base = node.module.removeprefix("ltx2_core").removeprefix(".")
            for alias in node.names:
                sub = f"{base}.{alias.name}".lstrip(".")
                found.add(sub if sub in modules else base)
        elif isinstance(node, ast.Import):
            found |= {a.name.removeprefix("ltx2_core").removeprefix(".") for a in node.names
                      if a.name.split(".")[0] == "ltx2_core"}
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import; ltx2_core imports absolutely")
    return found


def _room(module: str) -> int:
    best = max(((len(prefix), rank) for rank, (_, prefixes) in enumerate(ROOMS) for prefix in prefixes
                if module == prefix or (prefix and module.startswith(prefix + "."))), default=None)
    if best is None:
        raise AssertionError(f"ltx2_core.{module} is in no room: add it to ROOMS here and to docs/architecture.md")
    return best[1]


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(path, modules) - {name} for name, path in modules.items()}


def test_every_module_imports_only_its_own_room_or_lower_ones():
    upward = [f"ltx2_core.{a} ({ROOMS[_room(a)][0]}) imports ltx2_core.{b} ({ROOMS[_room(b)][0]})"
              for a, targets in sorted(_graph().items()) for b in sorted(targets) if _room(b) > _room(a)]
    assert not upward, "\n".join(upward)


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of `graph`, as the modules along it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        state[node] = 2
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_import_graph_has_no_circle():
    circle = _circle(_graph())
    assert circle is None, " -> ".join(f"ltx2_core.{m}".rstrip(".") for m in circle)


def test_the_checks_catch_a_circle_and_an_unplaced_module():
    """The two checks above can fail: a made-up circle is found and a module outside every room is refused."""
    assert _circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _circle({"a": {"b"}, "b": set()}) is None
    try:
        _room("somewhere_new")
    except AssertionError as error:
        assert "in no room" in str(error)
    else:
        raise AssertionError("a module outside every room was accepted")
    assert _room("loader.safetensors_file") < _room("quant.fp8") < _room("loader.transformer")
