"""A package made unimportable for one test, as on a machine without it."""

from __future__ import annotations

import builtins


def without_module(monkeypatch, missing: str) -> None:
    """`import missing` raises ImportError for the rest of the test (monkeypatch undoes it)."""
    real_import = builtins.__import__

    def refuse(name, *args, **kwargs):
        if name == missing:
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", refuse)
