"""The values our own socket types carry between the pack's nodes (ComfyUI's types are used at the edges)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ltx2_core import Lora, TextEmbeddings, TransformerConfig
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.model.video_vae import VideoEncoder
from ltx2_core.types import Decoders

MODEL, TEXT_ENCODER, CONDITIONING = "LTX2_MODEL", "LTX2_TEXT_ENCODER", "LTX2_CONDITIONING"
LATENT, GUIDANCE, UPSAMPLER = "LTX2_LATENT", "LTX2_GUIDANCE", "LTX2_UPSAMPLER"


class ModelHandle(NamedTuple):
    """LTX2_MODEL: the transformer and the checkpoint's VAEs and vocoder. `loras` are fused only while a sampler
    runs and restored afterwards, so a LoRA'd handle never changes the model a loader node has cached."""

    transformer: LTX2Transformer
    decoders: Decoders
    video_encoder: VideoEncoder
    checkpoint: str
    loras: tuple[tuple[Lora, float], ...] = ()

    @property
    def config(self) -> TransformerConfig:
        return self.transformer.config

    def modules(self) -> tuple[torch.nn.Module, ...]:
        return (self.transformer, self.video_encoder, *self.decoders)

    def release(self) -> None:
        """Frees every weight (they become `meta`); the handle then refuses to run."""
        for module in self.modules():
            module.to("meta")

    def check_loaded(self) -> ModelHandle:
        if next(self.transformer.parameters()).is_meta:
            raise ValueError(f"the model of {self.checkpoint} was released when its loader node loaded another "
                             "checkpoint; queue the workflow again to reload it")
        return self


class Conditioning(NamedTuple):
    """LTX2_CONDITIONING: the encoded positive and negative prompt (negative None when not encoded)."""

    positive: TextEmbeddings
    negative: TextEmbeddings | None
