"""The prompts of a multi-rank run encoded across the ranks (issue 38, item 2), the way `memory.text_layout` decides:
a whole replica per rank with the positive and negative prompts on different ranks (`prompt_split`), or Gemma's
layers as a pipeline over the ranks (`gemma_pipeline`), or (one rank or one prompt) rank 0 alone.

`SpreadEncoder` stands in for the `PromptEncoder` on every rank: its `encode(positive, negative)` is collective, so a
torchrun generation calls it on every rank (`spread_prompts` sets the run's `Distribution.prompts` to encode there)
and every rank returns the same embeddings. Prompt enhancement samples text with the whole model on one rank, so a
run that enhances keeps the earlier way (rank 0 encodes and broadcasts).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.distributed as dist
from torch import nn

from ltx2_core.memory.sizes import device_room, ram_bytes
from ltx2_core.memory.text_layout import TextBytes, TextLayout, plan_text
from ltx2_core.model.text import PromptEncoder
from ltx2_core.parallel.gemma_pipeline import GemmaPipeline, allowed_cuts
from ltx2_core.parallel.prompt_split import Traffic, encode_split
from ltx2_core.pipeline import Distribution, Models
from ltx2_core.request import Request
from ltx2_core.types import TextEmbeddings


def _bytes(module: nn.Module | None) -> int:
    if module is None:
        return 0
    return sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()) if not t.is_meta)


def text_bytes(encoder: PromptEncoder) -> TextBytes:
    """What the memory plan counts of a loaded encoder: its layers', embeddings' and head's bytes (final norm and
    projection), and one prompt's hidden state (max_length × D in Gemma's dtype)."""
    model = encoder.gemma
    if model is None:
        raise RuntimeError("this prompt encoder was released; load it again to encode prompts")
    embed = model.embed_tokens.weight
    state = encoder.tokenizer.max_length * embed.shape[1] * embed.element_size()
    return TextBytes(tuple(_bytes(layer) for layer in model.layers), _bytes(model.embed_tokens),
                     _bytes(model.norm) + _bytes(encoder.projection), state)


def room(encoder: PromptEncoder) -> int:
    """What the encoder may take on its device: the free memory there plus what it already holds (the CLI has
    loaded it whole on every rank)."""
    device = encoder.device
    held = text_bytes(encoder).whole
    if device.type == "cuda":
        return device_room(device) + held
    return (ram_bytes() or 0) + held


class SpreadEncoder:
    """A prompt encoder spread over `group` by `layout`; attributes it does not define are the wrapped encoder's.
    `traffic`: the tensor bytes this rank sent and received."""

    def __init__(self, encoder: PromptEncoder, layout: TextLayout, group: dist.ProcessGroup | None = None) -> None:
        self.inner, self.layout, self.group, self.traffic = encoder, layout, group, Traffic()
        self.pipeline = (GemmaPipeline(encoder, layout.bounds, group, self.traffic)
                         if layout.mode == "pipeline" else None)

    def __getattr__(self, name: str):
        if name == "inner":  # not set yet (a copy being built): no recursion through `inner`
            raise AttributeError(name)
        return getattr(self.inner, name)

    def encode(self, positive: str, negative: str | None = None) -> tuple[TextEmbeddings, TextEmbeddings | None]:
        """(positive, negative or None), each batch 1, on every rank; every rank calls it with the same prompts."""
        prompts = [positive] + ([] if negative is None else [negative])
        if self.pipeline is not None:
            both = self.pipeline.encode_batch(prompts)
            out = [both.select(i) for i in range(len(prompts))]
        else:
            out = encode_split(self.inner, prompts, self.group, self.traffic, spread=self.layout.mode == "prompts")
        return out[0], (out[1] if negative is not None else None)

    def encode_batch(self, prompts: Sequence[str]) -> TextEmbeddings:
        """Any number of prompts (batch len(prompts)) on every rank."""
        if self.pipeline is not None:
            return self.pipeline.encode_batch(prompts)
        parts = encode_split(self.inner, prompts, self.group, self.traffic, spread=self.layout.mode == "prompts")
        return TextEmbeddings(torch.cat([p.video for p in parts]), torch.cat([p.audio for p in parts]))


def plan_for(encoder: PromptEncoder, group: dist.ProcessGroup | None = None, budget: int | None = None,
             prompts: int = 2) -> TextLayout:
    """The layout every rank of `group` agrees on: each rank's room (or `budget` bytes) gathered, then planned."""
    rooms: list[int | None] = [None] * dist.get_world_size(group)
    dist.all_gather_object(rooms, budget if budget is not None else room(encoder), group=group)
    return plan_text(text_bytes(encoder), rooms, prompts, allowed_cuts(encoder.gemma))


def spread_prompts(models: Models, distribution: Distribution, group: dist.ProcessGroup | None = None,
                   budget: int | None = None) -> tuple[Models, Distribution]:
    """The torchrun hook: `models` with the encoder spread over `group`, and `distribution` encoding on every rank
    (the encoder's calls are the collectives). Collective."""
    encoder = SpreadEncoder(models.prompt_encoder, plan_for(models.prompt_encoder, group, budget), group)
    return models._replace(prompt_encoder=encoder), distribution._replace(prompts=lambda encode_here: encode_here())


def spread_text(request: Request, models: Models, distribution: Distribution,
                group: dist.ProcessGroup | None = None) -> tuple[Models, Distribution, str | None]:
    """The command line's hook under torchrun: (models, distribution, what was chosen) with the prompts encoded
    across `group`; unchanged (None) where a rank alone must encode: the prompt is enhanced first (sampling text
    needs the whole model on one rank), the mode runs in one process (hdr, dfr), there is no encoder or one rank."""
    if (request.enhance_prompt or request.mode in ("hdr", "dfr") or models.prompt_encoder is None
            or dist.get_world_size(group) == 1):
        return models, distribution, None
    models, distribution = spread_prompts(models, distribution, group)
    return models, distribution, models.prompt_encoder.layout.describe()
