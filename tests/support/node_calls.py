"""Calling the pack's nodes in tests the way ComfyUI calls them."""

from __future__ import annotations

from nodes import NODE_CLASS_MAPPINGS


def node(name: str, *args, **kwargs):
    """An instance's FUNCTION with the inputs, as ComfyUI's executor does: its outputs (a node that also shows
    something returns {"ui": ..., "result": outputs}; the executor takes the result)."""
    cls = NODE_CLASS_MAPPINGS[name]
    out = getattr(cls(), cls.FUNCTION)(*args, **kwargs)
    return out["result"] if isinstance(out, dict) and "result" in out else out
