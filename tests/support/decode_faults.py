"""Decode tasks that fail on one worker as a real one would (tests/distributed/test_decode_fallback.py): the
caller's `DecodeTask` replaced by one of these (pickled by class, so the worker runs this code), whose failing rank
raises inside the decode, after the signature check, while its peer is already waiting in the decode's collectives."""

from __future__ import annotations

import torch

from ltx2_core.runtime import decode_task
from ltx2_core.runtime.decode_task import DecodeTask
from ltx2_core.runtime.protocol import TaskContext

# what torch's CUDA caching allocator says when a tile does not fit
CUDA_OOM = ("CUDA out of memory. Tried to allocate 1.50 GiB. GPU 1 has a total capacity of 79.25 GiB of which "
            "612.00 MiB is free. Of the allocated memory 76.1 GiB is allocated by PyTorch")


class _FailingDecode(DecodeTask):
    """`DecodeTask` whose rank FAILING raises `error()` where its decode starts."""

    __slots__ = ()
    FAILING = 1

    @staticmethod
    def error() -> BaseException:
        raise NotImplementedError

    def run(self, context: TaskContext):
        if context.rank != self.FAILING:
            return super().run(context)
        decode_across = decode_task.decode_across

        def failing(*args, **kwargs):
            raise self.error()

        decode_task.decode_across = failing
        try:
            return super().run(context)
        finally:
            decode_task.decode_across = decode_across


class OutOfMemoryOnRankOne(_FailingDecode):
    @staticmethod
    def error() -> BaseException:
        return torch.OutOfMemoryError(CUDA_OOM)


class BrokenOnRankOne(_FailingDecode):
    @staticmethod
    def error() -> BaseException:
        return RuntimeError("a tile's shape does not match the blend buffer")
