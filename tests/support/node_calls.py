"""Calling the pack's nodes in tests the way ComfyUI calls them."""

from __future__ import annotations

from nodes import NODE_CLASS_MAPPINGS


def node(name: str, *args, **kwargs):
    """An instance's FUNCTION with the inputs, as ComfyUI's executor does."""
    cls = NODE_CLASS_MAPPINGS[name]
    return getattr(cls(), cls.FUNCTION)(*args, **kwargs)
