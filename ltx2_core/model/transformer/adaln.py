"""Timestep embeddings and AdaLN-single (PixArt-α style), spec §1.3."""

from __future__ import annotations

import math

import torch
from torch import nn

SINUSOID_CHANNELS = 256


def sinusoid(t: torch.Tensor, channels: int = SINUSOID_CHANNELS, max_period: float = 10000.0) -> torch.Tensor:
    """t (N,) -> (N, channels) fp32 `[cos, sin]` embedding with freq_k = exp(−ln(max_period)·k/(channels/2))."""
    half = channels // 2
    # same operation order as the reference: angles reach ~1000 rad, so one ulp of the frequency matters
    exponent = -math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half
    angles = t[:, None].float() * torch.exp(exponent)[None, :]
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


class TimestepMLP(nn.Module):
    """linear_1 -> SiLU -> linear_2 on the sinusoid."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(SINUSOID_CHANNELS, width)
        self.linear_2 = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(nn.functional.silu(self.linear_1(x)))


class TimestepEmbedding(nn.Module):
    """Holds the MLP under the checkpoint's name `emb.timestep_embedder`."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.timestep_embedder = TimestepMLP(width)

    def forward(self, t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return self.timestep_embedder(sinusoid(t).to(dtype))


class AdaLayerNormSingle(nn.Module):
    """t -> (linear(SiLU(E(t))) of width rows·D, E(t) of width D)."""

    def __init__(self, width: int, rows: int) -> None:
        super().__init__()
        self.emb = TimestepEmbedding(width)
        self.linear = nn.Linear(width, rows * width)

    def forward(self, t: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """t (B, n) already scaled (×1000) -> ((B, n, rows·D), (B, n, D))."""
        embedded = self.emb(t.flatten(), dtype)
        modulation = self.linear(nn.functional.silu(embedded))
        return modulation.unflatten(0, t.shape), embedded.unflatten(0, t.shape)


def modulation_rows(table: torch.Tensor, modulation: torch.Tensor, start: int, count: int) -> list[torch.Tensor]:
    """Rows start..start+count of `table (rows, D) + modulation (B, n, rows·D)`, each (B, n, D)."""
    rows = modulation.unflatten(-1, (table.shape[0], -1))[:, :, start : start + count]
    return list((table[start : start + count].to(rows.dtype) + rows).unbind(dim=2))
