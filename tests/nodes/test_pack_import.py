"""The pack imports the way ComfyUI imports it (as a package from its folder), with no ComfyUI installed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pack_imports_without_comfyui():
    spec = importlib.util.spec_from_file_location("ltx2_pack_under_test", ROOT / "__init__.py",
                                                  submodule_search_locations=[str(ROOT)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    assert isinstance(module.NODE_CLASS_MAPPINGS, dict)
    assert set(module.NODE_DISPLAY_NAME_MAPPINGS) <= set(module.NODE_CLASS_MAPPINGS)
    assert (ROOT / module.WEB_DIRECTORY).is_dir()
    assert all(name.startswith("LTX2") for name in module.NODE_CLASS_MAPPINGS)


def test_root_module_loads_outside_a_package():
    """pytest imports the root `__init__.py` as a plain module when the checkout's folder name is not a Python
    identifier (e.g. `custom_nodes/ComfyUI-LTX2`); that must not fail."""
    spec = importlib.util.spec_from_file_location("ComfyUI-LTX2", ROOT / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.NODE_CLASS_MAPPINGS == {} and module.WEB_DIRECTORY == "./web"
