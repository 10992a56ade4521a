"""Building blocks of the LTX-2.5 diffusion video decoder: channels-last (B, T, H, W, C) transformer layers.

Neighborhood attention with per-head RMS-normed q/k and absolute 3-D RoPE, a SwiGLU MLP, the linear pixel-shuffle
upsample, and the stage-5 block modulated by a shared AdaLN (scale/shift only: the file's static gates are folded
into the weights at load, so the residuals here are ungated).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ltx2_core.model.video_vae.neighborhood_attention import na3d

ROPE_BASE = 10000.0
MODULATION_CHUNKS = 7  # scale_msa, shift_msa, gate_msa, scale_mlp, shift_mlp, gate_mlp, gate_ctx (gates unused)


def rope_split(head_dim: int) -> tuple[int, int, int]:
    """Head channels rotated by the (t, h, w) positions: a quarter (even) for time, the rest halved (even)."""
    time = (head_dim // 4) // 2 * 2
    space = (head_dim - time) // 2
    if space % 2:
        time -= 2
        space = (head_dim - time) // 2
    return time, space, space


def inverse_frequencies(dim: int) -> torch.Tensor:
    """(dim/2,) 1 / base^(2i/dim), computed in float64 on the CPU as the reference does, then fp32."""
    exponents = torch.arange(0, dim, 2, dtype=torch.float64, device="cpu") / dim
    return (1.0 / ROPE_BASE ** exponents).float()


def rotate_axis(x: torch.Tensor, frequencies: torch.Tensor, axis: int) -> torch.Tensor:
    """RoPE on x (B, T, H, W, heads, D) by the 0-based position along `axis` (1..3); adjacent channel pairs, fp32."""
    positions = torch.arange(x.shape[axis], dtype=torch.float32, device=x.device)
    shape = [1] * 6
    shape[axis], shape[-1] = x.shape[axis], frequencies.shape[0]
    angle = (positions[:, None] * frequencies.to(x.device)[None, :]).reshape(shape)
    cos, sin = angle.cos(), angle.sin()
    pairs = x.float().unflatten(-1, (-1, 2))
    even, odd = pairs[..., 0], pairs[..., 1]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2).to(x.dtype)


class QKV(nn.Module):
    """Separate q/k/v projections (the file's fused `qkv` is split at load)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.to_q, self.to_k, self.to_v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)


class NeighborhoodAttention(nn.Module):
    """Multi-head 3-D neighborhood attention: q/k RMS-normed per head, q scaled by head_dim^-½, both rotated by
    absolute positions local to the tensor, then `na3d` with `kernel`."""

    def __init__(self, dim: int, kernel: tuple[int, int, int], head_dim: int) -> None:
        super().__init__()
        self.kernel, self.heads, self.head_dim = tuple(kernel), dim // head_dim, head_dim
        self.split = rope_split(head_dim)
        self.qkv = QKV(dim)
        self.proj = nn.Linear(dim, dim)
        self.q_norm = nn.RMSNorm(head_dim, eps=1e-6)
        self.k_norm = nn.RMSNorm(head_dim, eps=1e-6)

    def _rope(self, x: torch.Tensor) -> torch.Tensor:
        parts = x.split(self.split, dim=-1)
        return torch.cat([rotate_axis(p, inverse_frequencies(p.shape[-1]), axis) for axis, p in enumerate(parts, 1)],
                         dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, H, W, C) -> (B, T, H, W, C)."""
        heads = (*x.shape[:4], self.heads, self.head_dim)
        q = self.q_norm(self.qkv.to_q(x).view(heads)) * self.head_dim**-0.5
        k = self.k_norm(self.qkv.to_k(x).view(heads))
        v = self.qkv.to_v(x).view(heads)
        out = na3d(self._rope(q).contiguous(), self._rope(k).contiguous(), v.contiguous(), self.kernel)
        return self.proj(out.flatten(-2))


class SwiGLU(nn.Module):
    """w_down(silu(w_gate x) · w_up x), no biases; hidden = 4·dim rounded up to 16."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        hidden = (4 * dim + 15) // 16 * 16
        self.w_gate = nn.Linear(dim, hidden, bias=False)
        self.w_up = nn.Linear(dim, hidden, bias=False)
        self.w_down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))


class NABlock(nn.Module):
    """Deterministic pre-norm block of stages 1-4: x + attn(norm1 x), then x + mlp(norm2 x)."""

    def __init__(self, dim: int, kernel: tuple[int, int, int], head_dim: int) -> None:
        super().__init__()
        self.norm1 = nn.RMSNorm(dim, eps=1e-6)
        self.attn = NeighborhoodAttention(dim, kernel, head_dim)
        self.norm2 = nn.RMSNorm(dim, eps=1e-6)
        self.mlp = SwiGLU(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class DiffusionBlock(nn.Module):
    """Stage-5 block: adds the projected context, then AdaLN-modulated (1 + scale, + shift) attention and MLP
    residuals. `scale_shift_table` (7, C) is added to the shared modulation."""

    def __init__(self, dim: int, kernel: tuple[int, int, int], context_channels: int, head_dim: int) -> None:
        super().__init__()
        self.context_proj = nn.Linear(context_channels, dim)
        self.scale_shift_table = nn.Parameter(torch.zeros(MODULATION_CHUNKS, dim))
        self.norm1 = nn.RMSNorm(dim, eps=1e-6)
        self.attn = NeighborhoodAttention(dim, kernel, head_dim)
        self.norm2 = nn.RMSNorm(dim, eps=1e-6)
        self.mlp = SwiGLU(dim)

    def forward(self, x: torch.Tensor, context: torch.Tensor, modulation: torch.Tensor) -> torch.Tensor:
        """x (B, T, H, W, C), context (B, T, H, W, C_ctx), modulation (B, 7, C) -> (B, T, H, W, C)."""
        rows = (modulation + self.scale_shift_table.to(modulation.dtype))[:, :, None, None, None, :]
        scale_msa, shift_msa, scale_mlp, shift_mlp = rows[:, 0], rows[:, 1], rows[:, 3], rows[:, 4]
        x = x + self.context_proj(context)
        x = x + self.attn(self.norm1(x) * (1.0 + scale_msa) + shift_msa)
        return x + self.mlp(self.norm2(x) * (1.0 + scale_mlp) + shift_mlp)


class PixelShuffleUpsample(nn.Module):
    """Linear to prod(stride)·C/reduction channels, then depth-to-space (channel order (c, pt, ph, pw)); a time
    stride of 2 drops the first output frame when `drop_leading_frame` (only the tile holding frame 0)."""

    def __init__(self, channels: int, stride: tuple[int, int, int], reduction: int) -> None:
        super().__init__()
        self.stride = tuple(stride)
        self.proj = nn.Linear(channels, math.prod(stride) * channels // reduction)

    def forward(self, x: torch.Tensor, drop_leading_frame: bool = True) -> torch.Tensor:
        """(B, T, H, W, C) -> (B, T·st [−1], H·sh, W·sw, C·/reduction)."""
        b, t, h, w, _ = x.shape
        st, sh, sw = self.stride
        x = self.proj(x).unflatten(-1, (-1, st, sh, sw)).permute(0, 1, 5, 2, 6, 3, 7, 4)
        x = x.reshape(b, t * st, h * sh, w * sw, -1)
        return x[:, 1:] if st == 2 and drop_leading_frame else x


class SharedAdaLN(nn.Module):
    """silu(t_emb) -> Linear -> (B, 7, C) modulation rows shared by every stage-5 block."""

    def __init__(self, dim: int, embedding_dim: int) -> None:
        super().__init__()
        self.proj = nn.Linear(embedding_dim, MODULATION_CHUNKS * dim)

    def forward(self, embedding: torch.Tensor) -> torch.Tensor:
        return self.proj(F.silu(embedding)).unflatten(-1, (MODULATION_CHUNKS, -1))
