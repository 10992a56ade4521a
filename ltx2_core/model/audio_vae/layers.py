"""The mel -> waveform generator skeleton shared by HiFi-GAN (LTX-2.0) and BigVGAN-v2 (LTX-2.3) (spec §4).

conv_pre (k7) -> per stage: [activation] -> ConvTranspose1d ×rate (channels halve) -> mean of the multi-receptive-field
residual blocks -> act_post -> conv_post (k7, -> 2 channels) -> tanh / clamp / nothing. The two generators differ only
in their residual blocks and activations. Parameter names are the checkpoint's (`conv_pre`, `ups.N`, `resblocks.N`,
`act_post`, `conv_post`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ltx2_core.model.audio_vae.config import MEL_BINS, STEREO, GeneratorConfig

ResBlockFactory = Callable[[int, int, tuple[int, int, int]], nn.Module]  # (channels, kernel, dilations) -> block


def same_padding(kernel_size: int, dilation: int = 1) -> int:
    """Padding that keeps the length of a stride-1 convolution with an odd kernel."""
    return (kernel_size - 1) * dilation // 2


def dilated_conv_pairs(
    channels: int, kernel_size: int, dilations: tuple[int, ...]
) -> tuple[nn.ModuleList, nn.ModuleList]:
    """`convs1` (dilated 1, 3, 5, …) and `convs2` (undilated) of a resblock, length-preserving, file names."""
    convs1 = nn.ModuleList(nn.Conv1d(channels, channels, kernel_size, dilation=d, padding=same_padding(kernel_size, d))
                           for d in dilations)
    convs2 = nn.ModuleList(nn.Conv1d(channels, channels, kernel_size, padding=same_padding(kernel_size))
                           for _ in dilations)
    return convs1, convs2


def check_mel(mel: torch.Tensor) -> None:
    """ValueError naming the expected (B, 2, T, 64) layout unless `mel` has it."""
    if mel.dim() != 4 or mel.shape[1] != STEREO or mel.shape[3] != MEL_BINS or mel.shape[0] == 0 or mel.shape[2] == 0:
        raise ValueError(f"vocoder input must be a stereo log-mel spectrogram of shape (B, {STEREO}, T, {MEL_BINS}) "
                         f"with B, T >= 1 (the audio decoder's output), got {tuple(mel.shape)}")


class Generator(nn.Module):
    """Mel features (B, 128, T) -> waveform (B, 2, T · samples_per_frame) at `config.sample_rate`."""

    def __init__(self, config: GeneratorConfig, resblock: ResBlockFactory, act_post: nn.Module) -> None:
        super().__init__()
        self.config = config
        channels = [config.initial_channels] + [config.channels(i) for i in range(len(config.upsample_rates))]
        self.conv_pre = nn.Conv1d(STEREO * MEL_BINS, config.initial_channels, 7, padding=3)
        self.ups = nn.ModuleList(
            nn.ConvTranspose1d(channels[i], channels[i + 1], kernel, rate, padding=(kernel - rate) // 2)
            for i, (rate, kernel) in enumerate(zip(config.upsample_rates, config.upsample_kernel_sizes))
        )
        # flat in the file: stage i owns resblocks[i·K : (i+1)·K], one per kernel size
        self.resblocks = nn.ModuleList(
            resblock(width, kernel, dilations)
            for width in channels[1:]
            for kernel, dilations in zip(config.resblock_kernel_sizes, config.resblock_dilations)
        )
        self.act_post = act_post
        self.conv_post = nn.Conv1d(channels[-1], STEREO, 7, padding=3, bias=config.final_bias)

    @property
    def sample_rate(self) -> int:
        return self.config.sample_rate

    def stage_activation(self, x: torch.Tensor) -> torch.Tensor:
        """Applied before each upsampling convolution (none for BigVGAN, whose blocks start with one)."""
        return x

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        """mel (B, 2, T, 64) -> waveform (B, 2, T · samples_per_frame)."""
        check_mel(mel)
        b, _, t, _ = mel.shape
        # (B, 2, T, 64) -> (B, 2·64, T): channel = stereo side · 64 + mel bin
        return self.generate(mel.transpose(2, 3).reshape(b, STEREO * MEL_BINS, t))

    def generate(self, features: torch.Tensor) -> torch.Tensor:
        """features (B, 128, T) -> waveform (B, 2, T · samples_per_frame)."""
        x = self.conv_pre(features)
        kernels = len(self.config.resblock_kernel_sizes)
        for stage, up in enumerate(self.ups):
            x = up(self.stage_activation(x))
            blocks = self.resblocks[stage * kernels:(stage + 1) * kernels]
            # every block reads the same input, so they are independent; the reference averages them
            x = torch.stack([block(x) for block in blocks]).mean(dim=0)
        x = self.conv_post(self.act_post(x))
        if self.config.final_activation == "tanh":
            return torch.tanh(x)
        if self.config.final_activation == "clamp":
            return x.clamp(-1, 1)
        return x
