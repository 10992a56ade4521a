"""The embeddings connector (spec §2, `Embeddings1DConnector`): learnable registers replace the padding, then a few
pre-norm transformer blocks with 1-D RoPE over the token index, then a parameter-free RMSNorm.

Register substitution is vectorised for a batch of prompts of different lengths: every token gets a destination
index computed with cumulative sums (valid tokens to the front in order, padding after them) and is moved there
with one scatter, so the shapes never depend on the mask's values. The reference's version indexes with the boolean
mask (a device-to-host read) and works for one prompt only.
"""

from __future__ import annotations

import torch
from torch import nn

from ltx2_core.model.transformer.attention import Attention
from ltx2_core.model.transformer.layers import FeedForward, rms
from ltx2_core.model.transformer.rope import rope_tables
from ltx2_core.model.text.config import ConnectorConfig
from ltx2_core.types import Rope

EPS = 1e-6


def valid_tokens_first(x: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Moves each sample's valid tokens to the front (order kept). x (B, T, W), mask (B, T) ->
    (moved (B, T, W), front (B, T) bool: True on the first n_valid positions)."""
    valid = attention_mask.bool()
    n_valid = valid.sum(dim=1, keepdim=True)
    to_front = valid.cumsum(dim=1) - 1  # destination of a valid token
    to_back = n_valid + (~valid).cumsum(dim=1) - 1  # destination of a pad
    destination = torch.where(valid, to_front, to_back)
    moved = torch.empty_like(x).scatter_(1, destination.unsqueeze(-1).expand_as(x), x)
    front = torch.arange(x.shape[1], device=x.device) < n_valid
    return moved, front


class ConnectorBlock(nn.Module):
    """x += attn1(rms(x), RoPE); x += ff(rms(x)). Keys `attn1.*`, `ff.net.*` as in the checkpoint."""

    def __init__(self, config: ConnectorConfig) -> None:
        super().__init__()
        self.attn1 = Attention(config.width, config.width, config.heads, config.head_dim,
                               gated=config.gated_attention, rope_type=config.rope_type, eps=EPS)
        self.ff = FeedForward(config.width, bias=config.ff_bias)

    def forward(self, x: torch.Tensor, rope: Rope) -> torch.Tensor:
        x = x + self.attn1(rms(x, EPS), rope=rope)
        return x + self.ff(rms(x, EPS))


class EmbeddingsConnector(nn.Module):
    """(B, T, W) text features + (B, T) mask -> (B, T, W) context for one DiT stream; every output token is used."""

    def __init__(self, config: ConnectorConfig) -> None:
        super().__init__()
        self.config = config
        self.learnable_registers = nn.Parameter(torch.empty(config.num_registers, config.width))
        self.transformer_1d_blocks = nn.ModuleList(ConnectorBlock(config) for _ in range(config.num_layers))

    def forward(self, features: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        tokens = features.shape[1]
        if tokens % self.config.num_registers:
            raise ValueError(f"the prompt length {tokens} must be a multiple of the {self.config.num_registers} "
                             "learnable registers; tokenize to the default 1024 tokens")
        moved, front = valid_tokens_first(features, attention_mask)
        # register r sits at every position p with p mod R == r (the reference tiles them over the sequence)
        registers = self.learnable_registers.to(features.dtype).repeat(tokens // self.config.num_registers, 1)
        x = torch.where(front.unsqueeze(-1), moved, registers)
        rope = self.rope(tokens, features.device, features.dtype)
        for block in self.transformer_1d_blocks:
            x = block(x, rope)
        return rms(x, EPS)

    def rope(self, tokens: int, device: torch.device, dtype: torch.dtype) -> Rope:
        """1-D RoPE over the token index (fraction index / max_pos), shared by the whole batch."""
        c = self.config
        positions = torch.arange(tokens, device=device, dtype=torch.float32).view(1, 1, tokens, 1)
        return rope_tables(positions, dim=c.width, heads=c.heads, max_pos=c.max_pos, theta=c.rope_theta,
                           rope_type=c.rope_type, float64=c.rope_float64, dtype=dtype, middle=False)
