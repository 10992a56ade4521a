"""Counting the ATen ops a piece of code dispatches, to prove it never reads device values on the host."""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode

SYNC_OPS = ("aten._local_scalar_dense", "aten.nonzero", "aten.is_nonzero", "aten.item")


class OpCensus(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        self.counts[name] = self.counts.get(name, 0) + 1
        return func(*args, **(kwargs or {}))

    def syncs(self) -> dict[str, int]:
        """The host-sync ops seen, with their counts (empty when none)."""
        return {op: self.counts[op] for op in SYNC_OPS if self.counts.get(op)}
