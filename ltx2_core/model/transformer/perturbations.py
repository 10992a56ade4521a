"""Per-sample guidance perturbations as tensors, so cond / uncond / STG / isolated passes share one batched forward.

Built once per run from one `PassPerturbation` per sample. Which blocks are touched is known on the host (no device
reads); the per-sample keep flags live on the device as one `(kinds, blocks, B)` tensor moved there in a single copy.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import NamedTuple

import torch

from ltx2_core.types import Blocks, PassPerturbation


class Skip(enum.IntEnum):
    VIDEO_SELF_ATTN = 0
    AUDIO_SELF_ATTN = 1
    A2V = 2
    V2A = 3


_FIELDS = {
    Skip.VIDEO_SELF_ATTN: "skip_video_self_attn",
    Skip.AUDIO_SELF_ATTN: "skip_audio_self_attn",
    Skip.A2V: "skip_a2v",
    Skip.V2A: "skip_v2a",
}


class AttentionSkip(NamedTuple):
    """How one block treats one attention for the whole batch."""

    skip_all: bool  # every sample skips: do not compute it at all
    keep: torch.Tensor | None  # (B, 1, 1) 1 = run, 0 = skip, for mixed batches; None when no sample skips


_RUN_ALL = AttentionSkip(False, None)
_SKIP_ALL = AttentionSkip(True, None)


def _skipped(blocks: Blocks, block: int) -> bool:
    return blocks == "all" or block in blocks


class BlockSkips(NamedTuple):
    """How one block treats each of its attentions, indexed by `Skip` value. Resolved once per run and handed to
    each block by the model's loop, so a block's code never reads its own index: blocks with the same skips share
    one compiled graph."""

    video_self_attn: AttentionSkip
    audio_self_attn: AttentionSkip
    a2v: AttentionSkip
    v2a: AttentionSkip


class BatchPerturbations:
    """Perturbations of a batch whose sample b is the guidance pass `passes[b]`."""

    def __init__(
        self, passes: Sequence[PassPerturbation], num_blocks: int, device: torch.device | str, dtype: torch.dtype
    ) -> None:
        for p in passes:
            for field in _FIELDS.values():
                blocks = getattr(p, field)
                if blocks != "all" and any(not 0 <= b < num_blocks for b in blocks):
                    raise ValueError(f"{field}={blocks} names a block outside 0..{num_blocks - 1}")
        skipped = [
            [[_skipped(getattr(p, _FIELDS[kind]), block) for p in passes] for block in range(num_blocks)]
            for kind in Skip
        ]
        self.batch_size = len(passes)
        self._counts = [[sum(row) for row in per_kind] for per_kind in skipped]  # host-side, per kind and block
        keep = 1.0 - torch.tensor(skipped, dtype=torch.float32)  # (kinds, blocks, B)
        self._keep = keep.to(device=device, dtype=dtype)
        # resolved once per run: the block loop only indexes this list
        self.blocks = [BlockSkips(*(self._skip(kind, block) for kind in Skip)) for block in range(num_blocks)]

    def _skip(self, kind: Skip, block: int) -> AttentionSkip:
        count = self._counts[kind][block]
        if count == 0:
            return _RUN_ALL
        if count == self.batch_size:
            return _SKIP_ALL
        return AttentionSkip(False, self._keep[kind, block].view(-1, 1, 1))


NO_PERTURBATION = BlockSkips(_RUN_ALL, _RUN_ALL, _RUN_ALL, _RUN_ALL)


def block_skips(perturbations: BatchPerturbations | None, block: int) -> BlockSkips:
    return NO_PERTURBATION if perturbations is None else perturbations.blocks[block]
