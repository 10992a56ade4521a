"""Counting the ATen ops a piece of code dispatches, to prove it never reads device values on the host and never
copies host data to the device."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SYNC_OPS = ("aten._local_scalar_dense", "aten.nonzero", "aten.is_nonzero", "aten.item")
# torch.tensor(python data) / torch.as_tensor dispatch lift_fresh: host data becoming a tensor, i.e. an H2D copy on GPU
HOST_DATA_OPS = ("aten.lift_fresh", "aten.lift_fresh_copy")
_COPIES = ("aten._to_copy", "aten.copy_", "aten.to")


class OpCensus(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}
        self.host_to_device = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func.overloadpacket)
        self.counts[name] = self.counts.get(name, 0) + 1
        out = func(*args, **kwargs)
        if name in HOST_DATA_OPS or (name in _COPIES and _crosses_devices(args, out)):
            self.host_to_device += 1
        return out

    def syncs(self) -> dict[str, int]:
        """The host-sync ops seen, with their counts (empty when none)."""
        return {op: self.counts[op] for op in SYNC_OPS if self.counts.get(op)}

    def transfers(self) -> int:
        """Host-to-device copies: host data turned into tensors, plus copies between two devices."""
        return self.host_to_device


def _crosses_devices(args, out) -> bool:
    devices = {a.device for a in (*args, out) if isinstance(a, torch.Tensor)}
    return len(devices) > 1
