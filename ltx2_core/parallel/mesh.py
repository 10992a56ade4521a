"""The named device mesh of a parallel layout: axes `cfg`, `sp`, `tp` (the process group of each is `mesh[axis]`)."""

from __future__ import annotations

import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from ltx2_core.parallel.config import AXES, ParallelConfig


def device_mesh(config: ParallelConfig, device_type: str) -> DeviceMesh:
    """The mesh over the started ranks (torch.distributed initialised); the layout is checked against them first."""
    config.check(world_size=dist.get_world_size())
    return init_device_mesh(device_type, config.shape, mesh_dim_names=AXES)
