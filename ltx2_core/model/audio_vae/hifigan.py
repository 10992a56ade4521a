"""LTX-2.0's vocoder: a stereo HiFi-GAN V1 generator, log-mel (B, 2, T, 64) at 100 frames/s -> 24 kHz waveform.

Stages use leaky-ReLU(0.1) activations and `resblock "1"` blocks (three dilated conv pairs each); the last
activation before conv_post is `nn.LeakyReLU()` with PyTorch's default slope 0.01, not 0.1, as in the reference the
released weights go with. The output is squashed by tanh into [-1, 1].
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ltx2_core.model.audio_vae.config import GeneratorConfig
from ltx2_core.model.audio_vae.layers import Generator, dilated_conv_pairs

LEAKY_SLOPE = 0.1


class ResBlock1(nn.Module):
    """Three residual steps x += conv2(lrelu(conv1(lrelu(x)))) with conv1 dilated 1, 3, 5: (B, C, L) -> same."""

    def __init__(self, channels: int, kernel_size: int, dilations: tuple[int, int, int]) -> None:
        super().__init__()
        self.convs1, self.convs2 = dilated_conv_pairs(channels, kernel_size, dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for conv1, conv2 in zip(self.convs1, self.convs2):
            x = x + conv2(F.leaky_relu(conv1(F.leaky_relu(x, LEAKY_SLOPE)), LEAKY_SLOPE))
        return x


class HiFiGAN(Generator):
    """Stereo log-mel (B, 2, T, 64) -> waveform (B, 2, T · 240) at 24 kHz in [-1, 1] (released sizes)."""

    def __init__(self, config: GeneratorConfig) -> None:
        if config.amp:
            raise ValueError("HiFiGAN takes a `resblock \"1\"` generator config; AMP1 configs build a BigVGAN")
        super().__init__(config, ResBlock1, nn.LeakyReLU())  # default slope 0.01, as trained

    def stage_activation(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, LEAKY_SLOPE)
