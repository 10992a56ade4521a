"""ComfyUI entry point of the LTX-2 Fast node pack. Imports without ComfyUI (the nodes bridge degrades gracefully)."""

import os
import sys

_PACK_DIR = os.path.dirname(os.path.abspath(__file__))
if _PACK_DIR not in sys.path:
    # appended, not prepended: ComfyUI's own top-level modules (e.g. its `nodes`) keep precedence
    sys.path.append(_PACK_DIR)

if __package__ and __package__ in sys.modules:
    from .nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS
else:
    # executed outside an importable package, not the way ComfyUI loads a pack (it registers the package in
    # sys.modules first): e.g. pytest importing the root `__init__.py` of a checkout whose folder name is not an
    # identifier (`custom_nodes/ComfyUI-LTX2`); there are no nodes to register then
    NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS = {}, {}

WEB_DIRECTORY = "./web"

__all__ = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS", "WEB_DIRECTORY"]
