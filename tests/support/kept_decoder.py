"""A task for the tests of HDR's decode on the workers (`runtime.float32_decode`): picklable, importable by a
worker."""

from __future__ import annotations

from typing import NamedTuple

import torch.distributed as dist

from ltx2_core.runtime.decode_task import KEPT
from ltx2_core.runtime.protocol import TaskContext


class KeptDtypes(NamedTuple):
    """Every rank's kept video decoder's floating tensors' dtypes (a sorted list of names per rank, None for a rank
    that keeps none), gathered to rank 0."""

    def run(self, context: TaskContext):
        kept = context.kept.get(KEPT)
        mine = None if kept is None else sorted({str(t.dtype) for t in (*kept[0].parameters(), *kept[0].buffers())
                                                 if t.is_floating_point()})
        every: list = [None] * dist.get_world_size()
        dist.all_gather_object(every, mine)
        return every if context.rank == 0 else None
