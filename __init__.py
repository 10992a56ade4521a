"""ComfyUI entry point of the LTX-2 Fast node pack. Imports without ComfyUI (the nodes bridge degrades gracefully)."""

import os
import sys

_PACK_DIR = os.path.dirname(os.path.abspath(__file__))
if _PACK_DIR not in sys.path:
    # appended, not prepended: ComfyUI's own top-level modules (e.g. its `nodes`) keep precedence
    sys.path.append(_PACK_DIR)

from .nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS  # noqa: E402

WEB_DIRECTORY = "./web"

__all__ = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS", "WEB_DIRECTORY"]
