"""Tasks for the tests of the workers' task jobs (`runtime.protocol.Task`): picklable, importable by a worker."""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.distributed as dist

from ltx2_core.runtime.protocol import TaskContext


class SumOfRanks(NamedTuple):
    """Every rank adds `scale * (its rank + 1)` into an all-reduce; each also counts its runs in `kept`. Rank 0
    returns (the sum, its count, a tensor of its device type's name length, None)."""

    scale: float

    def run(self, context: TaskContext):
        total = torch.tensor([self.scale * (context.rank + 1)])
        dist.all_reduce(total)
        context.kept["runs"] = context.kept.get("runs", 0) + 1
        return total, context.kept["runs"], torch.full((2,), float(len(context.device.type))), None


class Fails(NamedTuple):
    """Rank `rank` raises; the others return at once."""

    rank: int

    def run(self, context: TaskContext):
        if context.rank == self.rank:
            raise ValueError(f"task failed on purpose on rank {context.rank}")
        return None
