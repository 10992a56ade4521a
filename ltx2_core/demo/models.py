"""Every component of a generation at toy size with random weights: what `ModelFiles` runs without a checkpoint."""

from __future__ import annotations

import torch

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.demo.decoders import demo_audio_encoder, demo_decoders, demo_upsampler, demo_video_encoder
from ltx2_core.demo.text import demo_prompt_encoder
from ltx2_core.demo.transformer import demo_lora, demo_transformer
from ltx2_core.request_models import Models
from ltx2_core.releases import DEFAULT_VERSION
from ltx2_core.model.decoders import Decoders


def demo_models(version: str = DEFAULT_VERSION, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
                ) -> Models:
    """The tiny random-weight models of structure `version`; the distilled LoRA is random too."""
    config = TransformerConfig.tiny(version)
    transformer = demo_transformer(config).to(device=device, dtype=dtype)
    return Models(
        transformer=transformer,
        prompt_encoder=demo_prompt_encoder(config),  # on the CPU; its tiny output moves to the DiT's device
        decoders=Decoders(*(m.to(device=device, dtype=dtype) for m in demo_decoders(version))),
        upsampler=demo_upsampler(version).to(device=device, dtype=dtype),
        distilled_lora=demo_lora(transformer, seed=1, name="demo distilled LoRA"),
        video_encoder=demo_video_encoder(version).to(device=device, dtype=dtype),
        audio_encoder=demo_audio_encoder().to(device=device, dtype=dtype),
    )
