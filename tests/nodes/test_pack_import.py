"""The pack imports the way ComfyUI imports it (as a package from its folder), with no ComfyUI installed, and every
node it registers keeps the pack's conventions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from support.node_contract import node_problems

ROOT = Path(__file__).resolve().parents[2]
COMFYUI_MODULES = ("comfy", "folder_paths", "server", "comfy_api", "execution")


@pytest.fixture()
def pack():
    """The pack loaded as ComfyUI's `load_custom_node` does: a package registered in sys.modules, then executed."""
    before = set(sys.modules)
    spec = importlib.util.spec_from_file_location("ltx2_pack_under_test", ROOT / "__init__.py",
                                                  submodule_search_locations=[str(ROOT)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    loaded = set(sys.modules) - before
    yield module, loaded
    for name in loaded:
        if name == spec.name or name.startswith(spec.name + "."):
            sys.modules.pop(name, None)


def test_pack_registers_its_nodes_package_without_comfyui(pack):
    module, loaded = pack
    nodes = sys.modules["ltx2_pack_under_test.nodes"]  # the pack's own `nodes`, not ComfyUI's top-level one
    assert module.NODE_CLASS_MAPPINGS is nodes.NODE_CLASS_MAPPINGS
    assert module.NODE_DISPLAY_NAME_MAPPINGS is nodes.NODE_DISPLAY_NAME_MAPPINGS
    assert set(module.NODE_DISPLAY_NAME_MAPPINGS) == set(module.NODE_CLASS_MAPPINGS)  # every node has a name
    assert (ROOT / module.WEB_DIRECTORY).is_dir()
    assert not [name for name in loaded if name.split(".")[0] in COMFYUI_MODULES]


def test_every_registered_node_keeps_the_conventions(pack):
    module, _ = pack
    problems = [p for node_id, cls in module.NODE_CLASS_MAPPINGS.items() for p in node_problems(node_id, cls)]
    assert problems == []


def test_the_conventions_catch_a_bad_node():
    """The check above can fail: a node without prefix, category, method, tooltips or a valid return finds each."""

    class Bad:
        CATEGORY = "video"
        FUNCTION = "run"
        RETURN_TYPES = ["IMAGE"]
        RETURN_NAMES = ("a", "b")

        @classmethod
        def INPUT_TYPES(cls):
            return {"required": {"seed": ("INT", {"default": 0}), "text": ("STRING",)}}

    problems = node_problems("MyNode", Bad)
    for fault in ("LTX2 prefix", "CATEGORY 'video'", "FUNCTION 'run'", "RETURN_TYPES", "RETURN_NAMES",
                  "MyNode.seed: the input has no tooltip", "MyNode.text: the input has no tooltip"):
        assert any(fault in p for p in problems), (fault, problems)


def test_root_module_loads_outside_a_package():
    """pytest imports the root `__init__.py` as a plain module when the checkout's folder name is not a Python
    identifier (e.g. `custom_nodes/ComfyUI-LTX2`); that must not fail."""
    spec = importlib.util.spec_from_file_location("ComfyUI-LTX2", ROOT / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.NODE_CLASS_MAPPINGS == {} and module.WEB_DIRECTORY == "./web"


def test_json_route_only_with_a_running_server(monkeypatch):
    """`add_json_route` (nodes/parallel.py's /ltx2/devices at import) registers on ComfyUI's server, and does
    nothing where ComfyUI's modules run without one (a script importing them in-process, bench/native_swap.py)."""
    from types import SimpleNamespace

    from nodes import bridge

    registered = []

    class Routes:
        def get(self, path):
            return lambda handler: registered.append((path, handler))

    class PromptServer:  # ComfyUI's class: `instance` is set only when the server is built
        pass

    monkeypatch.setattr(bridge, "IN_COMFYUI", True)
    monkeypatch.setattr(bridge, "server", SimpleNamespace(PromptServer=PromptServer))
    bridge.add_json_route("/ltx2/test", dict)
    assert registered == []
    PromptServer.instance = SimpleNamespace(routes=Routes())
    bridge.add_json_route("/ltx2/test", dict)
    assert [path for path, _ in registered] == ["/ltx2/test"]
