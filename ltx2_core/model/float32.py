"""A module run in float32 for one call (HDR's decode: `hdr_pipeline.decode_hdr` here,
`runtime.decode_task.DecodeTask.float32` on the workers): every floating parameter and buffer cast to float32 for the
call and put back in its own dtype after it, in place (the module object and its tensors' identities kept)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def in_float32(module: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """`module` with its floating tensors in float32 while the block runs, each back in its dtype after (also when
    the block raises); a float32 module is left as it is."""
    tensors = [t for t in (*module.parameters(), *module.buffers()) if t.is_floating_point()]
    dtypes = [t.dtype for t in tensors]
    try:
        for t in tensors:
            t.data = t.data.float()
        yield module
    finally:
        for t, dtype in zip(tensors, dtypes):
            t.data = t.data.to(dtype)
