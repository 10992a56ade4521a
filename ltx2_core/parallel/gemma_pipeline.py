"""Gemma's layers split over ranks as a pipeline (issue 38, item 2): rank r keeps layers [a_r, b_r) on its device
(rank 0 also the token embeddings, the last rank the final norm and the text projection); the rest of its copy of
the language model goes to `meta` (no memory).

It is a pass over the loaded model, as the other parallel passes: the model's own forward still runs on every rank
(its masks and RoPE are computed from the token ids, which every rank has), with the layers a rank does not hold
replaced, per instance, by relays: the layer just before its range receives the running hidden state from the
previous rank, the others return their input; its last layer sends its output on. Once the forward is through, each
rank sends the hidden states of its layers to the last rank, which projects them (feature extractor + connectors)
and broadcasts the contexts. The hidden states a rank computes are the one-device forward's own (the same ops on the
same inputs), so the embeddings equal the one-device encoding of the same batch.

Gemma 4's KV sharing (the last `num_kv_shared_layers` layers reuse an earlier layer's keys and values) is kept on one
rank: a cut between a reusing layer and the layer that stores its K/V is not allowed (`allowed_cuts`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch import nn

from ltx2_core.model.text import PromptEncoder
from ltx2_core.parallel.prompt_split import Traffic, broadcast_embeddings, global_rank
from ltx2_core.types import TextEmbeddings


def allowed_cuts(model: nn.Module) -> set[int] | None:
    """The layer indices a pipeline rank may start at (None: any): not past a layer whose K/V a later layer reuses."""
    config = model.config
    modes, types = getattr(config, "kv_modes", None), list(config.layer_types)
    if modes is None or "reuse" not in modes:
        return None
    stores = [max(j for j in range(i) if modes[j] == "store" and types[j] == types[i])
              for i, mode in enumerate(modes) if mode == "reuse"]
    return set(range(1, min(stores) + 1))


def _returns_tuple(model: nn.Module) -> bool:
    """Whether the model's loop reads `layer_outputs[0]` (transformers 4.x decoder layers return tuples)."""
    try:
        return "layer_outputs[0]" in inspect.getsource(type(model).forward)
    except (OSError, TypeError):
        return False


class GemmaPipeline:
    """This rank's part of the pipeline over `group` (every rank of it builds one with the same `bounds`); patches
    `encoder.gemma` in place and drops what the rank does not hold. `encode_batch` is collective."""

    def __init__(self, encoder: PromptEncoder, bounds: Sequence[tuple[int, int]],
                 group: dist.ProcessGroup | None = None, traffic: Traffic | None = None) -> None:
        self.encoder, self.group = encoder, group
        self.traffic = traffic if traffic is not None else Traffic()
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        if len(bounds) != self.world:
            raise ValueError(f"{len(bounds)} layer ranges for {self.world} ranks")
        self.bounds = tuple(bounds)
        self.start, self.end = self.bounds[self.rank]
        self.last = self.rank == self.world - 1
        model = encoder.gemma
        if model is None:
            raise RuntimeError("this prompt encoder was released; load it again before splitting it")
        self.tuples = _returns_tuple(model)
        self._patch(model)
        if not self.last:
            encoder.projection = None

    def owned(self, rank: int) -> list[int]:
        """The hidden-state indices `rank` computes: the embeddings on rank 0, then each held layer's output (the
        last one after the final norm)."""
        start, end = self.bounds[rank]
        return ([0] if rank == 0 else []) + [i + 1 for i in range(start, end)]

    def _patch(self, model: nn.Module) -> None:
        device = self.encoder.device
        for index, layer in enumerate(model.layers):
            if self.start <= index < self.end:
                if index == self.end - 1 and not self.last:
                    layer.forward = self._sending(layer.forward)
                continue
            layer.to("meta")
            layer.forward = self._receiving if index == self.start - 1 else self._passing
        embed = model.embed_tokens
        if self.rank > 0:
            width, dtype = embed.weight.shape[1], embed.weight.dtype
            embed.to("meta")
            embed.forward = lambda ids: torch.zeros(*ids.shape, width, dtype=dtype, device=device)
        if not self.last:
            model.norm.to("meta")
            model.norm.forward = lambda x: x

    def _out(self, x: torch.Tensor):
        return (x,) if self.tuples else x

    def _passing(self, hidden: torch.Tensor, *args, **kwargs):
        return self._out(hidden)

    def _receiving(self, hidden: torch.Tensor, *args, **kwargs):
        """The previous rank's last layer output, in place of this (unheld) layer's."""
        state = torch.empty_like(hidden)
        dist.recv(state, src=global_rank(self.group, self.rank - 1), group=self.group)
        self.traffic.count("hidden state", state.numel() * state.element_size(), received=1)
        return self._out(state)

    def _sending(self, forward: Callable) -> Callable:
        def run(*args, **kwargs):
            out = forward(*args, **kwargs)
            state = (out[0] if isinstance(out, tuple) else out).contiguous()
            dist.send(state, dst=global_rank(self.group, self.rank + 1), group=self.group)
            self.traffic.count("hidden state", state.numel() * state.element_size(), sent=1)
            return out
        return run

    @torch.no_grad()
    def encode_batch(self, prompts: Sequence[str]) -> TextEmbeddings:
        """The prompts' embeddings (batch len(prompts)) on every rank: the layers run rank after rank, the hidden
        states gathered on the last rank, projected there and broadcast."""
        encoder = self.encoder
        tokens = encoder.tokenizer(prompts)
        ids, mask = tokens.input_ids.to(encoder.device), tokens.attention_mask.to(encoder.device)
        states = list(encoder.backbone.hidden_states(encoder.gemma, ids, mask))
        self._gather(states)
        embeddings = encoder.projection(states, mask) if self.last else None
        return broadcast_embeddings(embeddings, self.world - 1, self.group, self.traffic, encoder.device)

    def _gather(self, states: list[torch.Tensor]) -> None:
        """The other ranks' hidden states into `states` on the last rank (each rank sends those it computed)."""
        last = global_rank(self.group, self.world - 1)
        for rank in range(self.world - 1):
            for index in self.owned(rank):
                state = states[index].contiguous()
                nbytes = state.numel() * state.element_size()
                if self.rank == rank:
                    dist.send(state, dst=last, group=self.group)
                    self.traffic.count("hidden states to the projection", nbytes, sent=1)
                elif self.last:
                    states[index] = torch.empty_like(state)
                    dist.recv(states[index], src=global_rank(self.group, rank), group=self.group)
                    self.traffic.count("hidden states to the projection", nbytes, received=1)
