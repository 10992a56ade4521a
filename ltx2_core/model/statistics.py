"""Per-channel latent statistics shared by the video VAE, the audio VAE and the latent upsampler (spec §3, §4, §5).

Diffusion runs in the normalised space `(z − mean) / std`; decoders un-normalise their input first. The buffer
names are the checkpoint's (`per_channel_statistics.mean-of-means` / `std-of-means`); the file's other statistics
(`channel`, `mean-of-stds`, …) are not used and not loaded.
"""

from __future__ import annotations

import torch
from torch import nn

STATISTICS = ("mean-of-means", "std-of-means")


class PerChannelStatistics(nn.Module):
    """Holds `mean-of-means` and `std-of-means` (channels,) and applies them along one tensor dimension."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.channels = channels
        # identity until loaded (mean 0, std 1)
        self.register_buffer("mean-of-means", torch.zeros(channels))
        self.register_buffer("std-of-means", torch.ones(channels))

    def _stats(self, x: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
        if x.shape[dim] != self.channels:
            raise ValueError(f"latent has {x.shape[dim]} channels along dim {dim} (shape {list(x.shape)}) but the "
                             f"statistics have {self.channels}; the latent is from another model")
        view = [1] * x.dim()
        view[dim] = self.channels
        mean = self.get_buffer("mean-of-means").view(view).to(x.dtype)
        std = self.get_buffer("std-of-means").view(view).to(x.dtype)
        return mean, std

    def normalize(self, x: torch.Tensor, dim: int = 1) -> torch.Tensor:
        mean, std = self._stats(x, dim)
        return (x - mean) / std

    def un_normalize(self, x: torch.Tensor, dim: int = 1) -> torch.Tensor:
        mean, std = self._stats(x, dim)
        return x * std + mean
