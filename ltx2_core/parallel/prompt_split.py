"""Prompts encoded on different ranks (issue 38, item 2): prompt i on rank i mod N, each rank encoding its share in
one batch with its whole replica of the encoder, then every prompt's contexts broadcast from the rank that encoded
it, so all ranks hold every prompt's `TextEmbeddings`.

Equality: prompts are padded on the left to the tokenizer's fixed `max_length`, so a prompt encoded alone (batch 1)
sees the same tokens, mask and positions as in the one-device batch of two; the only difference is the GEMM's
blocking by batch size (float rounding, ≤ 1e-5 in fp32). Against a one-device call with the same batch (the prompt
alone) the result is the same computation and is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from ltx2_core.model.text import PromptEncoder
from ltx2_core.types import TextEmbeddings


@dataclass
class Traffic:
    """The tensor bytes this rank sent and received while encoding (pickled shape metadata not counted). A
    broadcast counts its payload once per receiving rank on the sender's side, whatever the backend's algorithm."""

    sent: int = 0
    received: int = 0
    messages: dict[str, int] = field(default_factory=dict)

    def count(self, kind: str, nbytes: int, *, sent: int = 0, received: int = 0) -> None:
        """`sent`/`received`: how many copies of `nbytes` left / reached this rank as `kind`."""
        self.sent += sent * nbytes
        self.received += received * nbytes
        if sent or received:
            self.messages[kind] = self.messages.get(kind, 0) + 1


def global_rank(group: dist.ProcessGroup | None, rank: int) -> int:
    """The default group's rank of `group`'s rank `rank` (collectives name their source by it)."""
    return rank if group is None else dist.get_global_rank(group, rank)


def broadcast_embeddings(embeddings: TextEmbeddings | None, owner: int, group: dist.ProcessGroup | None,
                         traffic: Traffic, device: torch.device) -> TextEmbeddings:
    """`owner`'s (group rank) embeddings on every rank of `group`: shapes and dtypes first, then the two tensors."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    meta = [None if embeddings is None else [(t.shape, t.dtype) for t in embeddings]]
    dist.broadcast_object_list(meta, src=global_rank(group, owner), group=group)
    tensors = []
    for index, (shape, dtype) in enumerate(meta[0]):
        tensor = (embeddings[index].to(device).contiguous() if rank == owner
                  else torch.empty(shape, dtype=dtype, device=device))
        dist.broadcast(tensor, src=global_rank(group, owner), group=group)
        nbytes = tensor.numel() * tensor.element_size()
        traffic.count("contexts", nbytes, sent=world - 1 if rank == owner else 0, received=int(rank != owner))
        tensors.append(tensor)
    return TextEmbeddings(*tensors)


def owners(prompts: int, world: int, *, spread: bool = True) -> list[int]:
    """The group rank that encodes each prompt: i mod `world`, or rank 0 for all (`spread` False)."""
    return [i % world if spread else 0 for i in range(prompts)]


def encode_split(encoder: PromptEncoder, prompts: Sequence[str], group: dist.ProcessGroup | None = None,
                 traffic: Traffic | None = None, *, spread: bool = True) -> list[TextEmbeddings]:
    """Every prompt's embeddings (batch 1 each) on every rank of `group`; each rank encodes the prompts it owns
    (`owners`) in one batch. Collective: every rank calls it with the same prompts."""
    traffic = traffic if traffic is not None else Traffic()
    rank = dist.get_rank(group)
    who = owners(len(prompts), dist.get_world_size(group), spread=spread)
    mine = [i for i, owner in enumerate(who) if owner == rank]
    local = encoder.encode_batch([prompts[i] for i in mine]) if mine else None
    out = []
    for index, owner in enumerate(who):
        here = local.select(mine.index(index)) if owner == rank else None
        out.append(broadcast_embeddings(here, owner, group, traffic, encoder.device))
    return out
