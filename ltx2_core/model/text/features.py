"""Feature extractors (spec §2): Gemma's hidden states of every layer -> one text feature vector per token.

The reference stacks the L hidden states into (B, T, D, L), normalises, flattens with the layer index fastest
(feature d·L + l) and applies one Linear(D·L -> out). Here the per-layer statistics are computed first (cheap
reductions), then normalisation, flattening and the projection run over chunks of `token_chunk` tokens: the same
single matmul per chunk, without the full stacked and flattened (B, T, D·L) tensors the reference materialises
(0.8 GB each in bf16 for a batch of 2 at 1024 tokens). Statistics are computed in fp32 whatever the model dtype.
Padding is handled with masks only (no indexing), so there is no host synchronisation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

EPS = 1e-6
TOKEN_CHUNK = 128

# (layer index, hidden state chunk as fp32 (B, t, D)) -> normalised chunk (B, t, D), pads not yet zeroed
Normalize = Callable[[int, torch.Tensor], torch.Tensor]


def _check_width(hidden_states: Sequence[torch.Tensor], linear: nn.Linear) -> None:
    features = hidden_states[0].shape[-1] * len(hidden_states)
    if features != linear.in_features:
        raise ValueError(f"{len(hidden_states)} hidden states of width {hidden_states[0].shape[-1]} give {features} "
                         f"features, but the text projection expects {linear.in_features}")


def _project_chunks(
    hidden_states: Sequence[torch.Tensor],
    attention_mask: torch.Tensor,
    normalize: Normalize,
    projections: Sequence[tuple[nn.Linear, float]],
    token_chunk: int,
) -> list[torch.Tensor]:
    """For each (linear, scale): linear(scale · flatten_l(normalize(l, h_l)) with pads zeroed), chunked over tokens."""
    tokens = hidden_states[0].shape[1]
    outputs: list[list[torch.Tensor]] = [[] for _ in projections]
    for start in range(0, tokens, token_chunk):
        rows = slice(start, start + token_chunk)
        valid = attention_mask[:, rows].bool()[..., None, None]  # (B, t, 1, 1)
        stacked = torch.stack([normalize(l, h[:, rows].float()) for l, h in enumerate(hidden_states)], dim=-1)
        flat = torch.where(valid, stacked, 0.0).flatten(2)  # (B, t, D·L), layer index fastest
        flat = flat.to(projections[0][0].weight.dtype)  # one cast per chunk, shared by the projections
        for out, (linear, scale) in zip(outputs, projections):
            # linear(scale·x) = scale·(x Wᵀ) + b: scaling the (B, t, out) result avoids a (B, t, D·L) copy
            projected = F.linear(flat, linear.weight)
            projected = projected if scale == 1.0 else projected * scale
            out.append(projected if linear.bias is None else projected + linear.bias)
    return [torch.cat(chunks, dim=1) for chunks in outputs]


class MeanRangeFeatures(nn.Module):
    """LTX-2.0 (`FeatureExtractorV1`): per sample and layer, x̂ = 8·(x − mean)/(max − min + 1e-6) over the valid
    tokens and all D dims; pads zeroed; `aggregate_embed` (no bias). The same features feed video and audio."""

    def __init__(self, features: int, width: int, token_chunk: int = TOKEN_CHUNK) -> None:
        super().__init__()
        self.aggregate_embed = nn.Linear(features, width, bias=False)
        self.token_chunk = token_chunk

    def forward(self, hidden_states: Sequence[torch.Tensor], attention_mask: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        _check_width(hidden_states, self.aggregate_embed)
        valid = attention_mask.bool()[..., None]  # (B, T, 1)
        count = attention_mask.sum(dim=-1).float().view(-1, 1, 1) * hidden_states[0].shape[-1]
        stats = []  # per layer: (mean, 8 / (range + eps)), each (B, 1, 1)
        for hidden in hidden_states:
            x = hidden.float()
            mean = torch.where(valid, x, 0.0).sum(dim=(1, 2), keepdim=True) / (count + EPS)
            low = torch.where(valid, x, math.inf).amin(dim=(1, 2), keepdim=True)
            high = torch.where(valid, x, -math.inf).amax(dim=(1, 2), keepdim=True)
            stats.append((mean, 8 / (high - low + EPS)))

        def normalize(layer: int, x: torch.Tensor) -> torch.Tensor:
            mean, scale = stats[layer]
            return (x - mean) * scale

        (features,) = _project_chunks(hidden_states, attention_mask, normalize, [(self.aggregate_embed, 1.0)],
                                      self.token_chunk)
        return features, features


class PerTokenRmsFeatures(nn.Module):
    """LTX-2.3 (`FeatureExtractorV2`): per token and layer, x̂ = x·rsqrt(mean(x²) + 1e-6) over D; pads zeroed;
    video and audio projections (with bias) of x̂·√(out/D)."""

    def __init__(self, features: int, hidden_size: int, video_width: int, audio_width: int,
                 token_chunk: int = TOKEN_CHUNK) -> None:
        super().__init__()
        self.hidden_size = hidden_size  # Gemma's D, for the √(out/D) rescale
        self.video_aggregate_embed = nn.Linear(features, video_width)
        self.audio_aggregate_embed = nn.Linear(features, audio_width)
        self.token_chunk = token_chunk

    def forward(self, hidden_states: Sequence[torch.Tensor], attention_mask: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        _check_width(hidden_states, self.video_aggregate_embed)

        def normalize(layer: int, x: torch.Tensor) -> torch.Tensor:
            return x * torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + EPS)

        projections = [(linear, math.sqrt(linear.out_features / self.hidden_size))
                       for linear in (self.video_aggregate_embed, self.audio_aggregate_embed)]
        video, audio = _project_chunks(hidden_states, attention_mask, normalize, projections, self.token_chunk)
        return video, audio
