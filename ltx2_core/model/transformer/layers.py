"""Small layers of the transformer: the GELU(tanh) feed-forward and the LTX-2.0 caption projection."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Parameter-free RMSNorm over the last dim."""
    return F.rms_norm(x, (x.shape[-1],), eps=eps)


class GeluProjection(nn.Module):
    """Linear followed by GELU(tanh); the linear is named `proj` like in the checkpoint."""

    def __init__(self, dim_in: int, dim_out: int, bias: bool = True) -> None:
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.proj(x), approximate="tanh")


class FeedForward(nn.Module):
    """D -> 4D -> D. Keys `net.0.proj` and `net.2`; `net.1` is an Identity kept only for the checkpoint's numbering.
    `bias` False: neither linear has one (LTX-2.5)."""

    def __init__(self, dim: int, mult: int = 4, bias: bool = True) -> None:
        super().__init__()
        self.net = nn.Sequential(GeluProjection(dim, dim * mult, bias), nn.Identity(),
                                 nn.Linear(dim * mult, dim, bias=bias))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class CaptionProjection(nn.Module):
    """LTX-2.0 in-DiT text projection: linear_1 (caption -> D), GELU(tanh), linear_2 (D -> D)."""

    def __init__(self, caption_channels: int, width: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(caption_channels, width)
        self.linear_2 = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.gelu(self.linear_1(x), approximate="tanh"))
