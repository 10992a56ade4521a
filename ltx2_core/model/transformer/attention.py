"""Attention of the LTX-2 transformer (spec §1.6): q/k RMSNorm across all heads, RoPE, SDPA, optional per-head gates,
and the STG "V passthrough" selected per sample of the batch.

The local head count is derived from tensor shapes (`q.shape[-1] // head_dim`), so column-sharded projections
under tensor parallelism work without changing this code.
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from ltx2_core.model.transformer.attention_backends import sdpa  # noqa: F401 - PyTorch's own pick, for callers
from ltx2_core.model.transformer.attention_select import attend
from ltx2_core.model.transformer.kernels import qk_norm_rope
from ltx2_core.types import Rope


class AttentionFunction(Protocol):
    """The attention proper on (B, tokens, heads, head_dim) q, k, v -> (B, q tokens, heads, head_dim).

    mask: broadcastable to (B, 1, q tokens, k tokens) over all tokens of the sequence: bool, True where a query
    attends to a key, or an additive float bias in q's dtype (`attention_bias`: log of attention weights); a
    parallel pass that splits the tokens cuts or pads it itself; None: every query attends to every key. Same for
    every head, so splitting the heads (tensor or sequence parallel) leaves it as it is.
    """

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 mask: torch.Tensor | None = None) -> torch.Tensor: ...


def attention_bias(weights: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Attention weights (B, q tokens, k tokens) in [0, 1] -> the additive bias (B, 1, q tokens, k tokens) in
    `dtype`, as ltx-core's `_prepare_self_attention_mask`: log w (w clamped to the dtype's smallest normal
    number, the log taken in `dtype`), and the dtype's minimum where w ≤ 0 (never attended). Device work only (no
    host read)."""
    finfo = torch.finfo(dtype)
    weights = weights.to(dtype)
    bias = torch.log(weights.clamp(min=finfo.tiny))
    return torch.where(weights > 0, bias, torch.full_like(bias, finfo.min)).unsqueeze(1)


class QKNorm(nn.Module):
    """RMSNorm with a learnable weight over the whole projection width (all heads jointly)."""

    fusable = True  # a plain weighted RMSNorm: `kernels.qk_norm_rope` may fuse it with the RoPE

    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class Attention(nn.Module):
    """Multi-head attention; parameter names as in the checkpoint (`to_q`, `to_out.0`, `q_norm`, `to_gate_logits`)."""

    def __init__(
        self,
        query_dim: int,
        context_dim: int,
        heads: int,
        head_dim: int,
        *,
        gated: bool,
        rope_type: str,
        eps: float,
    ) -> None:
        super().__init__()
        inner = heads * head_dim
        self.head_dim = head_dim
        self.rope_type = rope_type
        self.to_q = nn.Linear(query_dim, inner)
        self.to_k = nn.Linear(context_dim, inner)
        self.to_v = nn.Linear(context_dim, inner)
        self.q_norm = QKNorm(inner, eps)
        self.k_norm = QKNorm(inner, eps)
        self.to_gate_logits = nn.Linear(query_dim, heads) if gated else None
        # a list only so the output projection is named `to_out.0` like in the checkpoint
        self.to_out = nn.ModuleList([nn.Linear(inner, query_dim)])
        # the attention proper, after q/k norm and RoPE: the backend `attention_select` picks; swapped by parallel
        # passes (e.g. Ulysses), which call `attend` inside
        self.attend: AttentionFunction = attend

    def keys_values(self, context: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(normalised keys, values) of a context, (B, S, inner) each: what `forward` takes as `kv` when the
        context is the same every step (LTX-2.0's text cross-attention)."""
        return self.k_norm(self.to_k(context)), self.to_v(context)

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        *,
        rope: Rope | None = None,
        k_rope: Rope | None = None,
        keep: torch.Tensor | None = None,
        passthrough: bool = False,
        kv: tuple[torch.Tensor, torch.Tensor] | None = None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x (B, T, query_dim), context (B, S, context_dim) or None (self-attention) -> (B, T, query_dim).

        keep: (B, 1, 1) per-sample blend, 1 = attention output, 0 = V passthrough (STG); None = attention for all.
        passthrough: every sample takes the V passthrough, so the q/k path is skipped.
        kv: the context's `keys_values`, computed once beforehand (then `context` is not read).
        mask: which tokens attend to which, bool or an additive bias (`AttentionFunction`); None: all to all.
        """
        context = x if context is None else context
        k, v = kv if kv is not None else (None, self.to_v(context))
        if passthrough:
            out = v
        else:
            # keys given (`kv`) are normalised already; else the projection is, with the RoPE (`kernels`)
            k = (self.to_k(context), self.k_norm) if k is None else (k, None)
            out = self._attend(x, k, v, rope, k_rope if k_rope is not None else rope, mask)
            if keep is not None:
                out = torch.lerp(v, out, keep)
        if self.to_gate_logits is not None:
            gates = 2.0 * torch.sigmoid(self.to_gate_logits(x))  # (B, T, heads); 1.0 at zero logits
            out = (out.unflatten(-1, (-1, self.head_dim)) * gates.unsqueeze(-1)).flatten(-2)
        return self.to_out[0](out)

    def _attend(
        self, x: torch.Tensor, k: tuple[torch.Tensor, nn.Module | None], v: torch.Tensor, rope: Rope | None,
        k_rope: Rope | None, mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """k: (keys (B, S, inner), the k_norm to normalise them with, or None when they are)."""
        q = qk_norm_rope(self.to_q(x), self.q_norm, rope, self.rope_type, self.head_dim)
        k = qk_norm_rope(k[0], k[1], k_rope if rope is not None else None, self.rope_type,
                         self.head_dim)  # (B, tokens, heads, head_dim) each
        v = v.unflatten(-1, (-1, self.head_dim))
        return self.attend(q, k, v, mask).flatten(-2)
