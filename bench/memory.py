"""Peak memory: the resident set of this process (Linux), and the live tensor bytes of a (fake) computation."""

from __future__ import annotations

import weakref
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary


def rss_kib(field: str = "VmRSS") -> int:
    """A /proc/self/status field in KiB (VmRSS: now, VmHWM: the high-water mark)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def reset_peak() -> int:
    """Resets the high-water mark to the current resident set and returns that base in KiB."""
    Path("/proc/self/clear_refs").write_text("5")
    return rss_kib("VmRSS")


def peak_extra_mib(base_kib: int) -> float:
    """How far the resident set rose above `base_kib` since the last reset, in MiB."""
    return (rss_kib("VmHWM") - base_kib) / 1024


class LiveTensorMemory(TorchDispatchMode):
    """Peak bytes of the tensor storages created inside this mode that are alive at the same time.

    That is what a caching allocator must hold for the computation, without fragmentation or kernel workspaces.
    Under `FakeTensorMode` no kernel runs, so the peak of a full-size, full-width model takes seconds on a CPU;
    tensors created before entering (the weights) are not counted.
    """

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0
        self._seen = WeakIdKeyDictionary()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor):
                storage = tensor.untyped_storage()
                if storage not in self._seen:
                    self._seen[storage] = size = storage.nbytes()
                    self.live += size
                    self.peak = max(self.peak, self.live)
                    weakref.finalize(storage, self._release, size)
        return out

    def ignore(self, tensors) -> None:
        """Storages that exist already (the weights): views of them made inside (e.g. a transposed weight) are not
        new memory."""
        for tensor in tensors:
            self._seen[tensor.untyped_storage()] = 0

    def _release(self, size: int) -> None:
        self.live -= size
