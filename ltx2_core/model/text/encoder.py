"""Prompts -> the DiT's text contexts: tokenizer, language model (a `TextBackbone`: Gemma 3, or Gemma 4 for LTX-2.5),
feature extractor and connectors (spec §2).

Positive and negative prompts go through Gemma as ONE batch of 2 (the reference encodes them one by one); each
prompt's result equals a single-prompt call, because padding is on the left and masked everywhere.

Memory policy (Gemma 3 12B is 24 GB in bf16, the 2.3 text projection another 6 GB):
* `device` is where encoding runs; with `offload_device=None` the weights stay there between calls;
* with `offload_device="cpu"` the weights live on the CPU and each part (Gemma, then the projection) visits
  `device` only while it runs, so the peak on the GPU is the larger part, not the sum;
* `release()` drops the weights once the prompts of a run are encoded.
An encoder is one object on one device: a multi-GPU run encodes once and hands the (small) embeddings to every
rank, it never replicates Gemma per GPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
from torch import nn

from ltx2_core.model.text.backbone import TextBackbone, backbone_of
from ltx2_core.model.text.projection import TextProjection
from ltx2_core.model.text.tokenizer import PromptTokenizer
from ltx2_core.model.text.config import TextConfig
from ltx2_core.types import TextEmbeddings


def check_prompt_length(max_length: int, config: TextConfig) -> None:
    """Padding is replaced by tiled registers, so the padded prompt length must be a multiple of their count."""
    registers = max(config.video.num_registers, config.audio.num_registers)
    if max_length % config.video.num_registers or max_length % config.audio.num_registers:
        raise ValueError(f"the prompt length {max_length} must be a multiple of the connectors' {registers} "
                         "learnable registers; use the default of 1024 tokens")


class PromptEncoder:
    """`gemma` is the language model (kept under that name: the memory placement and callers reach it there) and
    `backbone` its family's `TextBackbone`; None takes the registered one for the model's config `model_type`."""

    def __init__(
        self,
        tokenizer: PromptTokenizer,
        gemma: nn.Module,
        projection: TextProjection,
        *,
        backbone: TextBackbone | None = None,
        device: torch.device | str = "cpu",
        offload_device: torch.device | str | None = None,
    ) -> None:
        check_prompt_length(tokenizer.max_length, projection.config)
        self.tokenizer = tokenizer
        self.backbone = backbone if backbone is not None else backbone_of(gemma)
        self.gemma: nn.Module | None = gemma
        self.projection: TextProjection | None = projection
        self.device = torch.device(device)
        self.offload_device = None if offload_device is None else torch.device(offload_device)
        self.gemma_source = None  # the loader's GemmaSource: where image-to-video enhancement finds the vision tower
        # set by the loader: (text hidden size, device, dtype) -> the vision tower of that file (`loader.vision_weights`)
        self.load_vision = None

    def encode(self, positive: str, negative: str | None = None) -> tuple[TextEmbeddings, TextEmbeddings | None]:
        """Both prompts in one batched pass; returns (positive, negative or None), each with batch 1."""
        if negative is None:
            return self.encode_batch([positive]), None
        both = self.encode_batch([positive, negative])
        return both.select(0), both.select(1)

    @torch.no_grad()
    def encode_batch(self, prompts: Sequence[str]) -> TextEmbeddings:
        """Any number of prompts in one Gemma forward -> TextEmbeddings with batch len(prompts), on `device`."""
        if self.gemma is None or self.projection is None:
            raise RuntimeError("this prompt encoder was released; load it again to encode more prompts")
        tokens = self.tokenizer(prompts)
        input_ids = tokens.input_ids.to(self.device, non_blocking=True)
        mask = tokens.attention_mask.to(self.device, non_blocking=True)
        with self._visiting(self.gemma):
            states = self.backbone.hidden_states(self.gemma, input_ids, mask)
        with self._visiting(self.projection):
            return self.projection(states, mask)

    def release(self) -> None:
        """Drops the weights (Gemma and the projection); the caller's embeddings stay valid."""
        self.gemma = None
        self.projection = None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    @contextlib.contextmanager
    def _visiting(self, module: nn.Module) -> Iterator[None]:
        if self.offload_device is None:
            yield
            return
        module.to(self.device)
        try:
            yield
        finally:
            module.to(self.offload_device)
