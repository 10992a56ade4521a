"""Tasks for the tests of the workers' task jobs (`runtime.protocol.Task`): picklable, importable by a worker."""

from __future__ import annotations

import time
from typing import Any, NamedTuple
from unittest import mock

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


class CountedLoad(NamedTuple):
    """Runs the text task `load` (`runtime.text_task.LoadEncoder`) with its weight load recorded: every rank's
    non-meta bytes as `load_prompt_encoder` returned them (before any move or cut), which of Gemma's layers it read,
    and the non-meta bytes it holds after; rank 0 returns (the load's `Loaded`, each rank's record)."""

    load: Any

    def run(self, context: TaskContext):
        from ltx2_core.parallel.text_encode import text_bytes
        from ltx2_core.runtime import text_task

        read: list = []

        def recorded(*args, **kwargs):
            encoder = real(*args, **kwargs)
            sizes = text_bytes(encoder)
            read.append({"read": sizes.whole, "read_layers": [n > 0 for n in sizes.layers]})
            return encoder

        real = text_task.load_prompt_encoder
        with mock.patch.object(text_task, "load_prompt_encoder", recorded):
            loaded = self.load.run(context)
        held = context.kept.get(text_task.KEPT)
        mine = {"loads": read, "held": None if held is None else text_bytes(held.encoder.inner).whole}
        records: list = [None] * dist.get_world_size()
        dist.all_gather_object(records, mine)
        return loaded, records


class Sleeps(NamedTuple):
    """Every rank sleeps `seconds` (a Gemma that loads for minutes, scaled down), then rank 0 returns its rank."""

    seconds: float

    def run(self, context: TaskContext):
        time.sleep(self.seconds)
        return context.rank
