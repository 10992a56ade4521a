"""The components of an LTX-2.3 two-stage run at the released sizes, with random weights made on the device.

No checkpoint reaches a lent GPU, so `bench/end_to_end.py` builds each component with the released structure and
draws its weights where it runs: the large ones (the 48-block transformer, Gemma 3 12B, the text projection) are
built on `meta`, allocated once with `to_empty` and filled with `normal_` on the device (no host copy: seconds, not
minutes); the small ones (video and audio VAE decoders, vocoder, x2 upsampler) are built on the device, so the
buffers they compute at construction (filters, statistics) are right, and their parameters redrawn there. Scales:
matrices N(0, 1/fan-in), so activations keep their size through the layers; norm weights at their identity (1, or
0 for Gemma's 1 + w); the rest N(0, 0.02²). The distilled LoRA (rank 384 on every linear of the blocks, the layout of
the released one) is drawn on the device and kept in host memory in fp32, where `load_lora` puts a file's.

`Structure` scales the widths down (`divisor`; the audio VAE, 32 M parameters, keeps its 128 channels, which its
latent statistics fix) and cuts the blocks and Gemma's layers, so the same builders run on
the CPU at a tiny size (tests/unit/test_bench_end_to_end.py); divisor 1, 48 and 48 are the released sizes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import torch
from torch import nn

from ltx2_core.demo import DEMO_VOCODERS, demo_tokenizer
from ltx2_core.loader.lora import Lora, LoraPair
from ltx2_core.model.audio_vae import AudioDecoder, AudioDecoderConfig, VocoderConfig, build_vocoder
from ltx2_core.model.decoders import Decoders
from ltx2_core.model.text import PromptEncoder, TextProjection
from ltx2_core.model.text import gemma3 as gemma_lm
from ltx2_core.model.text.config import TextConfig
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.model.upsampler import LatentUpsampler, UpsamplerConfig
from ltx2_core.model.video_vae import VideoDecoder, VideoVaeConfig
from ltx2_core.model.video_vae.released import RELEASED_VAE_SECTIONS
from ltx2_core.pipeline import Models
from support.configs import RELEASED_2_3, RELEASED_AUDIO_VAE, RELEASED_VOCODERS

MODEL_VERSION = "2.3.0"
LORA_RANK = 384  # ltx-2.3-22b-distilled-lora-384
UPSAMPLER = UpsamplerConfig(in_channels=128, mid_channels=1024, num_blocks_per_stage=4, spatial_scale=2.0,
                            rational_resampler=False)  # ltx-2.3-spatial-upscaler-x2: the plain form


class Structure(NamedTuple):
    """Widths ÷ `divisor`, `layers` transformer blocks, `gemma_layers` Gemma layers, prompts padded to `text_tokens`
    (a multiple of the connectors' 128 registers): (1, 48, 48, 1024) is the release."""

    divisor: int = 1
    layers: int = 48
    gemma_layers: int = 48
    text_tokens: int = 1024

    def transformer_section(self) -> dict:
        d = self.divisor
        widths = ("attention_head_dim", "cross_attention_dim", "audio_attention_head_dim", "audio_cross_attention_dim",
                  "caption_channels", "connector_attention_head_dim", "audio_connector_attention_head_dim")
        return {**RELEASED_2_3, **{key: RELEASED_2_3[key] // d for key in widths}, "num_layers": self.layers}

    def gemma_values(self) -> dict:
        d, values = self.divisor, gemma_lm.GEMMA3_12B_TEXT
        scaled = {key: values[key] // d for key in ("hidden_size", "intermediate_size", "head_dim",
                                                     "query_pre_attn_scalar")}
        # a cut-down Gemma keeps only the ids the demo tokenizer gives (no 2 GB embedding on a CPU)
        return {**values, **scaled, "num_hidden_layers": self.gemma_layers} | ({"vocab_size": 384} if d > 1 else {})


@torch.no_grad()
def fill_(module: nn.Module, generator: torch.Generator, norm: float = 1.0) -> nn.Module:
    """Matrices (and embeddings) N(0, 1/fan-in), weights of norms `norm`, every other parameter N(0, 0.02²)."""
    for name, param in module.named_parameters():
        if param.dim() >= 2 and "scale_shift_table" not in name:
            param.normal_(0.0, (param.numel() // param.shape[0]) ** -0.5, generator=generator)
        elif "norm" in name:
            param.fill_(norm)
        else:
            param.normal_(0.0, 0.02, generator=generator)
    return module


def _on_meta(build, device: torch.device, dtype: torch.dtype) -> nn.Module:
    with torch.device("meta"):
        module = build()
    return module.to(dtype).to_empty(device=device).eval().requires_grad_(False)


def prompt_encoder(structure: Structure, device: torch.device, dtype: torch.dtype, seed: int = 0) -> PromptEncoder:
    """Gemma 3 12B's text model and the 2.3 text projection (feature extractor and both 8-block connectors), with
    the demo's SentencePiece tokenizer (trained in code: no download) padding to `structure.text_tokens`."""
    generator = torch.Generator(device).manual_seed(seed)
    values = structure.gemma_values()
    gemma = _on_meta(lambda: gemma_lm.build_on_meta(gemma_lm.text_config(values)), device, dtype)
    fill_(gemma, generator, norm=0.0)  # Gemma's norms scale by 1 + w
    gemma_lm.materialize_buffers(gemma, device)
    text = TextConfig.from_metadata(structure.transformer_section(), MODEL_VERSION)
    projection = _on_meta(lambda: TextProjection(text, values["hidden_size"], values["num_hidden_layers"] + 1),
                          device, dtype)
    fill_(projection, generator)
    return PromptEncoder(demo_tokenizer(structure.text_tokens), gemma, projection, device=device)


def transformer_config(structure: Structure) -> TransformerConfig:
    return TransformerConfig.from_metadata(structure.transformer_section(), MODEL_VERSION)


def models(structure: Structure, device: torch.device, dtype: torch.dtype, encoder: PromptEncoder | None,
           seed: int = 1) -> Models:
    """Everything a two-stage text-to-video run needs besides the prompt encoder (`encoder`, or None once it has
    encoded and been freed): the transformer, the decoders, the x2 upsampler and the distilled LoRA."""
    generator = torch.Generator(device).manual_seed(seed)
    transformer = fill_(_on_meta(lambda: LTX2Transformer(transformer_config(structure)), device, dtype), generator)
    d = structure.divisor
    vae = {**RELEASED_VAE_SECTIONS["2.3"], "decoder_base_channels": RELEASED_VAE_SECTIONS["2.3"]
           ["decoder_base_channels"] // d}
    # BigVGAN halves its width at each of its upsamplings: a cut-down run takes the demo's powers of two
    vocoder = RELEASED_VOCODERS["2.3"] if d == 1 else DEMO_VOCODERS["2.3"]
    upsampler = replace(UPSAMPLER, mid_channels=max(32, UPSAMPLER.mid_channels // d // 32 * 32))
    decoders = Decoders(
        _on_device(lambda: VideoDecoder(VideoVaeConfig.from_metadata(vae)), device, generator).to(dtype),
        _on_device(lambda: AudioDecoder(AudioDecoderConfig.from_metadata(RELEASED_AUDIO_VAE)), device,
                   generator).to(dtype),
        _on_device(lambda: build_vocoder(VocoderConfig.from_metadata(vocoder)), device, generator, 0.5))  # fp32
    return Models(transformer=transformer, prompt_encoder=encoder, decoders=decoders,
                  upsampler=_on_device(lambda: LatentUpsampler(upsampler), device, generator).to(dtype),
                  distilled_lora=random_lora(transformer, max(LORA_RANK // d, 4), generator))


@torch.no_grad()
def _on_device(build, device: torch.device, generator: torch.Generator, gain: float = 1.0) -> nn.Module:
    """Built on `device` (its buffers as construction computes them), parameters redrawn N(0, gain²/fan-in) as the
    demo's decoders (1-D ones with fan-in 100): the activations keep their size through the layers."""
    with torch.device(device):
        module = build().to(device)  # also what construction may have put on the CPU explicitly
    for param in module.parameters():
        fan_in = param[0].numel() if param.dim() > 1 else 100
        param.normal_(0.0, gain / fan_in**0.5, generator=generator)
    return module.eval().requires_grad_(False)


@torch.no_grad()
def random_lora(model: nn.Module, rank: int, generator: torch.Generator) -> Lora:
    """A LoRA of `rank` on every linear weight of the blocks (the released distilled LoRA's layout), drawn on the
    model's device and held on the host in fp32 as `load_lora` holds a file's; its update is about a tenth of the
    weight's size (down N(0, 1/in), up N(0, 0.01/rank)), so 48 refined blocks stay finite."""
    pairs = {}
    for target, weight in model.named_parameters():
        if target.startswith("transformer_blocks.") and target.endswith(".weight") and weight.dim() == 2:
            rows, cols = weight.shape
            down = torch.empty(rank, cols, device=weight.device).normal_(0.0, cols**-0.5, generator=generator)
            up = torch.empty(rows, rank, device=weight.device).normal_(0.0, 0.1 * rank**-0.5, generator=generator)
            pairs[target] = LoraPair(down.cpu(), up.cpu(), 1.0)
    return Lora(f"random distilled LoRA (rank {rank})", pairs)
