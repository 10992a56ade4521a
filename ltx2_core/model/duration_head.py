"""LTX-2.5's duration head (ltx-core 1.2.0 `duration_head`): the natural length of a clip, in seconds, predicted from
the prompt's text contexts (the connectors' outputs), so a run that gives no frame count can take one.

Structure, under the checkpoint's `duration_head.` keys (in the transformer's file or a file of its own): each
modality's contexts projected to a shared width (`video_input_proj` / `audio_input_proj`) plus a learnt modality
vector, the two token sets joined (video first), `num_queries` learnt queries attending to them in one
multi-head attention (`attention_pooler.cross_attn`, PyTorch's MultiheadAttention layout: `in_proj_weight` holds
q, k, v stacked), then a tanh-GELU MLP to one log-duration, exponentiated. No mask: the connectors fill padding with
their registers, so every context token is attended (as the reference).

`clip_frames` turns the seconds into a frame count as the reference's pipelines do: clamped to [min, max] seconds
and snapped down to the VAE's 8k + 1 grid (up where that undershoots the minimum). Nothing here is wired into a node
or the command line yet (issue 37, item 4; docs/ltx25/plan_37_duration_dubit_hdr_dfr.md).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors import safe_open
from torch import nn

KEY_PREFIX = "duration_head."
TIME_SCALE = 8  # the video VAE's frames per latent frame: lengths are 8k + 1


@dataclasses.dataclass(frozen=True)
class DurationHeadConfig:
    """The head's sizes: the contexts' widths come from the `transformer` metadata section (`cross_attention_dim`,
    `audio_cross_attention_dim`), the rest from its `duration_head` section (the reference's defaults where
    absent)."""

    video_dim: int = 4096
    audio_dim: int = 2048
    hidden: int = 256
    queries: int = 1
    heads: int = 4
    mlp_hidden: int = 256

    @classmethod
    def from_metadata(cls, config: Mapping[str, Any]) -> DurationHeadConfig:
        """From a file's parsed `config` metadata (its sections by name)."""
        transformer, head = config.get("transformer", {}), config.get("duration_head", {})
        defaults = cls()
        return cls(video_dim=transformer.get("cross_attention_dim", defaults.video_dim),
                   audio_dim=transformer.get("audio_cross_attention_dim", defaults.audio_dim),
                   hidden=head.get("pooler_hidden_dim", defaults.hidden),
                   queries=head.get("num_queries", defaults.queries),
                   heads=head.get("num_pooler_heads", defaults.heads),
                   mlp_hidden=head.get("mlp_hidden", defaults.mlp_hidden))


class _CrossAttention(nn.Module):
    """Multi-head attention of queries to tokens with PyTorch MultiheadAttention's parameter names."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"the duration head's width {width} is not a multiple of its {heads} heads")
        self.heads = heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * width, width))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * width))
        self.out_proj = nn.Linear(width, width)

    def forward(self, queries: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        wq, wk, wv = self.in_proj_weight.chunk(3)
        bq, bk, bv = self.in_proj_bias.chunk(3)
        q, k, v = (F.linear(x, w, b).unflatten(-1, (self.heads, -1)).transpose(1, 2)
                   for x, w, b in ((queries, wq, bq), (tokens, wk, bk), (tokens, wv, bv)))
        out = F.scaled_dot_product_attention(q, k, v)  # (B, heads, queries, head_dim)
        return self.out_proj(out.transpose(1, 2).flatten(-2))


class _Pooler(nn.Module):
    def __init__(self, width: int, queries: int, heads: int) -> None:
        super().__init__()
        self.query_tokens = nn.Parameter(torch.empty(queries, width))
        self.cross_attn = _CrossAttention(width, heads)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.cross_attn(self.query_tokens.expand(tokens.shape[0], -1, -1), tokens)


class DurationHead(nn.Module):
    """Seconds (B,) from the video and/or audio contexts (B, tokens, width) of one prompt."""

    def __init__(self, config: DurationHeadConfig = DurationHeadConfig()) -> None:
        super().__init__()
        self.config = config
        self.video_input_proj = nn.Linear(config.video_dim, config.hidden)
        self.video_modality_emb = nn.Parameter(torch.empty(config.hidden))
        self.audio_input_proj = nn.Linear(config.audio_dim, config.hidden)
        self.audio_modality_emb = nn.Parameter(torch.empty(config.hidden))
        self.attention_pooler = _Pooler(config.hidden, config.queries, config.heads)
        self.mlp_hidden = nn.Linear(config.hidden * config.queries, config.mlp_hidden)
        self.mlp_out = nn.Linear(config.mlp_hidden, 1)

    def forward(self, video: torch.Tensor | None = None, audio: torch.Tensor | None = None) -> torch.Tensor:
        if video is None and audio is None:
            raise ValueError("the duration head needs the prompt's video or audio contexts (or both)")
        tokens = torch.cat([proj(x) + emb for x, proj, emb in ((video, self.video_input_proj, self.video_modality_emb),
                                                                (audio, self.audio_input_proj, self.audio_modality_emb))
                            if x is not None], dim=1)
        pooled = self.attention_pooler(tokens).flatten(1)
        return self.mlp_out(F.gelu(self.mlp_hidden(pooled), approximate="tanh")).squeeze(-1).exp()


def clip_frames(seconds: float, fps: float, min_seconds: float = 1.0, max_seconds: float = 20.0) -> int:
    """A predicted length as a frame count: round(seconds · fps) clamped to [round(min · fps), round(max · fps)],
    snapped down to 8k + 1, or up to the next 8k + 1 where down falls below the minimum (never past the maximum)."""
    if not (math.isfinite(seconds) and fps > 0 and 0 < min_seconds <= max_seconds):
        raise ValueError(f"clip length from {seconds!r} s at {fps!r} fps within [{min_seconds!r}, {max_seconds!r}] s: "
                         "give a finite length, fps > 0 and 0 < min ≤ max")
    low, high = round(min_seconds * fps), round(max_seconds * fps)
    frames = max(low, min(round(seconds * fps), high))
    if frames < 1:
        raise ValueError(f"{min_seconds} s at {fps} fps is no frame: raise the minimum length")
    snapped = (frames - 1) // TIME_SCALE * TIME_SCALE + 1
    if snapped < low:
        snapped = min(-(-(low - 1) // TIME_SCALE) * TIME_SCALE + 1, high)
    return snapped


def load_duration_head(path: str | Path, device: torch.device | str = "cpu",
                       dtype: torch.dtype = torch.float32) -> DurationHead | None:
    """The head in a safetensors file (its `duration_head.` keys, beside others or alone; sizes from the file's
    `config` metadata), or None where the file has none (files before LTX-2.5). A file missing some of its
    tensors is refused, naming them."""
    with safe_open(str(path), "pt") as file:
        keys = [key for key in file.keys() if key.startswith(KEY_PREFIX)]
        if not keys:
            return None
        metadata = file.metadata() or {}
        state = {key.removeprefix(KEY_PREFIX): file.get_tensor(key) for key in keys}
    config = DurationHeadConfig.from_metadata(json.loads(metadata.get("config", "{}")))
    with torch.device("meta"):
        head = DurationHead(config)
    expected = set(head.state_dict())
    if missing := sorted(expected - set(state)):
        raise ValueError(f"{Path(path).name}: the duration head lacks {', '.join(missing)}; the file is incomplete "
                         "(download it again)")
    if extra := sorted(set(state) - expected):
        raise ValueError(f"{Path(path).name}: unknown duration head tensors {', '.join(extra)}: not a duration head "
                         "of LTX-2.5's layout")
    head.load_state_dict({k: v.to(dtype) for k, v in state.items()}, assign=True)
    return head.to(device).eval()
