"""The audio VAE decoder (spec §4): normalised latent (B, 8, T, 16) -> stereo log-mel spectrogram (B, 2, 4T-3, 64).

Time is the "height" axis and every convolution is causal along it: the kernel's look-back is zero-padded at the top
only, so mel frame t depends on latents up to t. Layout, finest level last:
conv_in -> mid (2 resnets) -> level 2 (resnets, ×2 upsample) -> level 1 (resnets, ×2 upsample) -> level 0 (resnets)
-> PixelNorm, SiLU, conv_out. Parameter names are the checkpoint's (`audio_vae.decoder.` stripped).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ltx2_core.model.audio_vae.config import STEREO, AudioDecoderConfig
from ltx2_core.model.statistics import PerChannelStatistics

NORM_EPS = 1e-6


def pixel_norm(x: torch.Tensor) -> torch.Tensor:
    """Parameter-free RMS normalisation over channels: (B, C, T, F) -> same shape."""
    return x / torch.sqrt(torch.mean(x**2, dim=1, keepdim=True) + NORM_EPS)


class CausalConv2d(nn.Module):
    """Stride-1 convolution, causal in time: (B, C_in, T, F) -> (B, C_out, T, F)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int) -> None:
        super().__init__()
        look_back = kernel_size - 1
        # F.pad order: (freq left, freq right, time top, time bottom); time is padded on the past side only
        self.padding = (look_back // 2, look_back - look_back // 2, look_back, 0)
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)  # `.conv` only to match the file's names

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, self.padding))


class ResnetBlock(nn.Module):
    """norm -> SiLU -> conv, twice, plus a (1×1-projected when the width changes) skip: (B, C_in, T, F) -> C_out."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.conv1 = CausalConv2d(in_channels, out_channels, 3)
        self.conv2 = CausalConv2d(out_channels, out_channels, 3)
        self.nin_shortcut = CausalConv2d(in_channels, out_channels, 1) if in_channels != out_channels else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(pixel_norm(x)))
        h = self.conv2(F.silu(pixel_norm(h)))
        if self.nin_shortcut is not None:
            x = self.nin_shortcut(x)
        return x + h


class Upsample(nn.Module):
    """Nearest ×2 in time and frequency, then a causal conv: (B, C, T, F) -> (B, C, 2T-1, 2F)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = CausalConv2d(channels, channels, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))
        # the first frame sees only the (duplicated) first input frame and the padding; dropping it keeps the
        # causal length rule T -> 2T-1 that mirrors the encoder's strided downsampling
        return x[:, :, 1:]


class MidBlock(nn.Module):
    """Two resnets at the coarsest width (the reference's optional attention between them is never used)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.block_1 = ResnetBlock(channels, channels)
        self.block_2 = ResnetBlock(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block_2(self.block_1(x))


class UpLevel(nn.Module):
    """One resolution level: `res_blocks + 1` resnets, then (except at the finest level) a ×2 upsample."""

    def __init__(self, in_channels: int, out_channels: int, blocks: int, upsample: bool) -> None:
        super().__init__()
        widths = [in_channels] + [out_channels] * blocks
        self.block = nn.ModuleList(ResnetBlock(i, o) for i, o in zip(widths[:-1], widths[1:]))
        self.upsample = Upsample(out_channels) if upsample else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.block:
            x = block(x)
        return self.upsample(x) if self.upsample is not None else x


class AudioDecoder(nn.Module):
    """Normalised audio latent (B, 8, T, 16) -> log-mel (B, 2, 4T-3, 64) (sizes of the released model)."""

    def __init__(self, config: AudioDecoderConfig) -> None:
        super().__init__()
        self.config = config
        self.per_channel_statistics = PerChannelStatistics(config.latent_features)
        widths = [config.base_channels * m for m in config.channel_multipliers]
        self.conv_in = CausalConv2d(config.latent_channels, widths[-1], 3)
        self.mid = MidBlock(widths[-1])
        # `up[level]` as in the file: level 0 is the finest and runs last
        inputs = widths[1:] + widths[-1:]
        self.up = nn.ModuleList(UpLevel(inputs[level], widths[level], config.res_blocks + 1, upsample=level > 0)
                                for level in range(len(widths)))
        self.conv_out = CausalConv2d(widths[0], STEREO, 3)

    def check_latent(self, latent: torch.Tensor) -> None:
        """ValueError naming the expected (B, 8, T, 16) layout unless `latent` has it (checked before any compute)."""
        c = self.config
        if (latent.dim() != 4 or latent.shape[1] != c.latent_channels or latent.shape[3] != c.latent_mel_bins
                or latent.numel() == 0):
            raise ValueError(f"audio latent must have shape (B, {c.latent_channels}, T, {c.latent_mel_bins}) (batch, "
                             f"channels, latent frames, latent mel bins; B, T >= 1), got {tuple(latent.shape)}")

    def un_normalize(self, latent: torch.Tensor) -> torch.Tensor:
        """Undoes the diffusion-space normalisation, per (channel, mel bin) feature of the patchified latent."""
        b, c, t, f = latent.shape
        tokens = latent.permute(0, 2, 1, 3).reshape(b, t, c * f)  # (B, T, c·f): the reference's patchify
        tokens = self.per_channel_statistics.un_normalize(tokens, dim=-1)
        return tokens.reshape(b, t, c, f).permute(0, 2, 1, 3)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        """latent (B, 8, T, 16), normalised -> log-mel (B, 2, 4T-3, 64).

        Each ×2 upsampling maps T -> 2T-1 frames and F -> 2F bins, so the output already has the reference's target
        shape (4T-3 frames, 64 bins) and its final crop/pad is not needed.
        """
        self.check_latent(latent)
        x = self.conv_in(self.un_normalize(latent))
        x = self.mid(x)
        for level in reversed(self.up):
            x = level(x)
        return self.conv_out(F.silu(pixel_norm(x)))
