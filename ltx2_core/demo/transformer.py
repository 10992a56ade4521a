"""The demo's tiny random-weight transformer, a random LoRA for it, and inputs of the shapes a real run uses."""

from __future__ import annotations

import torch
from torch import nn

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.loader.lora import Lora, LoraPair
from ltx2_core.geometry import audio_latent_length, audio_positions, check_video_size, latent_shape, video_positions
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.types import RunConstants, StreamInput, TextEmbeddings


def random_weights_(module: nn.Module, seed: int = 0, std: float = 0.2) -> nn.Module:
    """Fills every parameter with seeded N(0, std²) values in place (materializing `meta` tensors first)."""
    if any(t.is_meta for t in module.parameters()):
        module.to_empty(device="cpu")
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in module.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * std)
    return module


def demo_transformer(config: TransformerConfig | None = None, seed: int = 0) -> LTX2Transformer:
    """The tiny random-weight transformer (LTX-2.0 structure unless a config is given), in eval mode on the CPU."""
    config = config or TransformerConfig.tiny()
    with torch.device("meta"):
        model = LTX2Transformer(config)
    return random_weights_(model, seed).eval()


def demo_lora(model: nn.Module, rank: int = 4, seed: int = 0, std: float = 0.05, name: str = "demo LoRA") -> Lora:
    """A random LoRA on every linear weight of the transformer blocks (the layout of LTX-2's distilled LoRA)."""
    generator = torch.Generator().manual_seed(seed)
    pairs = {}
    for target, weight in model.named_parameters():
        if target.startswith("transformer_blocks.") and target.endswith(".weight") and weight.dim() == 2:
            rows, cols = weight.shape
            pairs[target] = LoraPair(torch.randn(rank, cols, generator=generator) * std,
                                     torch.randn(rows, rank, generator=generator) * std, 1.0)
    return Lora(name, pairs)


def demo_inputs(
    model: LTX2Transformer,
    *,
    pixel_frames: int = 17,
    height: int = 64,
    width: int = 96,
    fps: float = 24.0,
    sigma: float = 0.7,
    text_tokens: int = 128,
    text: TextEmbeddings | None = None,
    seed: int = 0,
    video_attention: torch.Tensor | None = None,
) -> tuple[StreamInput, StreamInput, RunConstants]:
    """Random latents for a clip of `pixel_frames` (8k+1) at height×width pixels, one sample per prompt of `text`
    (encoded prompts), or one sample with random text contexts of `text_tokens` tokens; `video_attention`: the
    video tokens' attention weights (`LTX2Transformer.prepare_run`)."""
    check_video_size(pixel_frames, height, width)
    cfg = model.config
    device, dtype = model.scale_shift_table.device, model.compute_dtype
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=generator).to(device=device, dtype=dtype)

    frames, rows, cols = latent_shape(pixel_frames, height, width)
    audio_tokens = audio_latent_length(pixel_frames, fps)
    caption = cfg.caption_channels
    if text is None:
        text = TextEmbeddings(randn(1, text_tokens, caption or cfg.video.context_dim),
                              randn(1, text_tokens, caption or cfg.audio.context_dim))
    batch = text.video.shape[0]
    run = model.prepare_run(
        video_positions(frames, rows, cols, fps, device=device),
        audio_positions(audio_tokens, device=device),
        text.video.to(device=device, dtype=dtype),
        text.audio.to(device=device, dtype=dtype),
        video_attention=None if video_attention is None else video_attention.to(device),
    )
    sigmas = torch.full((batch,), sigma, device=device, dtype=torch.float32)
    video = StreamInput(randn(1, frames * rows * cols, cfg.video.in_channels).expand(batch, -1, -1), sigmas,
                        sigmas[:, None])
    audio = StreamInput(randn(1, audio_tokens, cfg.audio.in_channels).expand(batch, -1, -1), sigmas, sigmas[:, None])
    return video, audio, run
