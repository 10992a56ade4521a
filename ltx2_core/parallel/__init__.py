"""Parallelism as a pass over the single-device model: the layout (`ParallelConfig`), its device mesh, and the
pass runners that spread guidance passes over devices. Nothing outside this package uses torch.distributed."""

from ltx2_core.parallel.config import AXES, ParallelConfig, ParallelConfigError, default_layout

__all__ = ["AXES", "ParallelConfig", "ParallelConfigError", "default_layout"]
