"""Nodes never ask where the model lives: no node reads a host's `workers`, tests whether there is a `transformer`
here, names a host or sampler class (the checkpoint loader builds the host), or tests a value's type against one;
they go through `ModelHandle.host` (ltx2_core.hosts)."""

from __future__ import annotations

import ast
from pathlib import Path

NODES = Path(__file__).resolve().parents[2] / "nodes"
HOST_CLASSES = {"LocalHost", "WorkerHost", "LocalSampler", "WorkerSampler", "Controller"}
# the checkpoint loader builds the host; native_model.py the one of a native MODEL (LTX-2 SamplerCustomAdvanced)
CONSTRUCTS = {"loaders.py": {"LocalHost", "WorkerHost", "Controller"}, "native_model.py": {"LocalHost"}}


def _problems(path: Path) -> list[str]:
    allowed = CONSTRUCTS.get(path.name, set())
    problems = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr == "workers":
            problems.append(f"{path.name}:{node.lineno} reads .workers")
        elif isinstance(node, (ast.If, ast.IfExp, ast.While, ast.BoolOp, ast.Compare)) and any(
                isinstance(n, ast.Attribute) and n.attr == "transformer" for n in ast.walk(
                    node.test if isinstance(node, (ast.If, ast.IfExp, ast.While)) else node)):
            problems.append(f"{path.name}:{node.lineno} tests the transformer's presence")
        elif isinstance(node, ast.Name) and node.id in HOST_CLASSES - allowed:
            problems.append(f"{path.name}:{node.lineno} names {node.id}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and \
                any(isinstance(n, ast.Name) and n.id in HOST_CLASSES for n in ast.walk(node.args[1])):
            problems.append(f"{path.name}:{node.lineno} tests a host's type")
    return problems


def test_no_node_asks_where_the_model_lives():
    problems = [p for path in sorted(NODES.glob("*.py")) for p in _problems(path)]
    assert not problems, "\n".join(problems)


def test_the_check_finds_a_branch_on_the_workers(tmp_path):
    """The check above can fail: the branch the nodes had before the hosts is found."""
    sample = tmp_path / "sampling.py"
    sample.write_text("def sample(model):\n    if model.workers is None:\n        return LocalSampler(model)\n"
                      "    if model.transformer is None:\n        return None\n"
                      "    return isinstance(model, WorkerHost)\n")
    found = {problem.split(" ", 1)[1] for problem in _problems(sample)}
    assert found == {"reads .workers", "names LocalSampler", "tests the transformer's presence", "names WorkerHost",
                     "tests a host's type"}
