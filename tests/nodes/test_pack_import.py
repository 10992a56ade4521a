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
