"""Building blocks of the video VAE (spec §3): causal 3-D convolution, pixel norm, residual blocks, resampling.

Parameter names are the checkpoint's (`conv.weight` inside every causal conv, `res_blocks.N.conv1`, …). Every kernel
is 3×3×3 with stride 1 (the released VAEs resample by space/depth rearrangement, never by strided convolution). The
code is written for inference: in-place activations and broadcasting instead of materialised repeats, so a
decoder stage holds as few full-size activations as possible.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from ltx2_core.model.transformer.adaln import TimestepEmbedding

PIXEL_NORM_EPS = 1e-8


def pixel_norm_factor(x: torch.Tensor) -> torch.Tensor:
    """1 / √(mean_c x² + 1e-8) over channels (dim 1) as (B, 1, F, H, W), without a full-size x² temporary."""
    mean_square = torch.linalg.vector_norm(x, dim=1, keepdim=True).square_().div_(x.shape[1])
    return mean_square.add_(PIXEL_NORM_EPS).rsqrt_()


def norm_act_into(out: torch.Tensor, x: torch.Tensor, shift_scale: tuple[torch.Tensor, ...] | None = None) -> None:
    """out ← SiLU(pixel_norm(x) [· (1 + scale) + shift]), written into `out` (e.g. a padded buffer's interior)."""
    torch.mul(x, pixel_norm_factor(x), out=out)
    if shift_scale is not None:
        shift, scale = shift_scale
        out.mul_(1 + scale).add_(shift)
    F.silu(out, inplace=True)


class CausalConv3d(nn.Module):
    """Conv3d k3 with spatial padding 1 (zeros / reflect) and time padded by repeating edge frames.

    causal: two copies of the first frame in front; non-causal: one copy of the first and of the last frame.
    The input is written once into a padded buffer (`buffer`, then `run`), so the padding costs no extra copies of
    the activation (the reference concatenates the time padding, then the convolution copies again to reflect);
    zero spatial padding is left to the convolution itself, which pads implicitly.
    """

    def __init__(self, in_channels: int, out_channels: int, padding_mode: str) -> None:
        super().__init__()
        self.reflect = padding_mode == "reflect"
        self.conv = nn.Conv3d(in_channels, out_channels, 3, padding=0 if self.reflect else (0, 1, 1))

    def forward(self, x: torch.Tensor, causal: bool) -> torch.Tensor:
        """(B, C_in, F, H, W) -> (B, C_out, F, H, W)."""
        buffer, interior = self.buffer(x, causal)
        interior.copy_(x)
        return self.run(buffer, causal)

    def buffer(self, x: torch.Tensor, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """An uninitialised padded buffer for an input shaped like x, and the view of it that x's values go to."""
        b, c, f, h, w = x.shape
        edge = 1 if self.reflect else 0
        buffer = x.new_empty(b, c, f + 2, h + 2 * edge, w + 2 * edge)
        start = 2 if causal else 1
        return buffer, buffer[:, :, start : start + f, edge : edge + h, edge : edge + w]

    def run(self, buffer: torch.Tensor, causal: bool) -> torch.Tensor:
        """Fills the buffer's padding from its interior, then convolves."""
        if self.reflect:
            buffer[..., 0, :], buffer[..., -1, :] = buffer[..., 2, :], buffer[..., -3, :]
            buffer[..., 0], buffer[..., -1] = buffer[..., 2], buffer[..., -3]
        if causal:
            buffer[:, :, :2] = buffer[:, :, 2:3]
        else:
            buffer[:, :, 0], buffer[:, :, -1] = buffer[:, :, 1], buffer[:, :, -2]
        return self.conv(buffer)


class ResnetBlock3D(nn.Module):
    """pixel-norm → [AdaLN] → SiLU → conv1 → pixel-norm → [AdaLN] → SiLU → conv2, plus the input.

    With timestep conditioning, `scale_shift_table` (4, C) plus the block stack's timestep embedding give
    shift1, scale1, shift2, scale2 per sample. Each normalised activation is written straight into its
    convolution's padded buffer, so a block holds at most three full-size tensors (input, buffer, output).
    """

    def __init__(self, channels: int, padding_mode: str, timestep_conditioning: bool) -> None:
        super().__init__()
        self.conv1 = CausalConv3d(channels, channels, padding_mode)
        self.conv2 = CausalConv3d(channels, channels, padding_mode)
        if timestep_conditioning:
            self.scale_shift_table = nn.Parameter(torch.zeros(4, channels))

    def forward(self, x: torch.Tensor, causal: bool, time: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, C, F, H, W); time (B, 4·C) or None -> (B, C, F, H, W)."""
        modulation = [None, None]
        if time is not None:
            table = self.scale_shift_table.to(x.dtype)
            rows = (table[None] + time.unflatten(1, (4, -1)))[..., None, None, None].unbind(1)
            modulation = [rows[:2], rows[2:]]
        buffer, interior = self.conv1.buffer(x, causal)
        norm_act_into(interior, x, modulation[0])
        h = self.conv1.run(buffer, causal)
        del buffer, interior  # before the next buffer is allocated, not after
        buffer, interior = self.conv2.buffer(h, causal)
        norm_act_into(interior, h, modulation[1])
        del h, interior
        return self.conv2.run(buffer, causal).add_(x)


class ResBlockStack(nn.Module):
    """`res_x`: `layers` residual blocks of equal width; with timestep conditioning, one shared time embedder."""

    def __init__(self, channels: int, layers: int, padding_mode: str, timestep_conditioning: bool) -> None:
        super().__init__()
        self.timestep_conditioning = timestep_conditioning
        if timestep_conditioning:
            self.time_embedder = TimestepEmbedding(4 * channels)
        self.res_blocks = nn.ModuleList(
            [ResnetBlock3D(channels, padding_mode, timestep_conditioning) for _ in range(layers)]
        )

    def forward(self, x: torch.Tensor, causal: bool, timestep: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, C, F, H, W); timestep (B,) already scaled, required with timestep conditioning."""
        time = self.time_embedder(timestep, x.dtype) if self.timestep_conditioning else None
        for block in self.res_blocks:
            x = block(x, causal, time)
        return x


def space_to_depth(x: torch.Tensor, stride: tuple[int, int, int]) -> torch.Tensor:
    """(B, C, F·p1, H·p2, W·p3) -> (B, C·p1·p2·p3, F, H, W), channel order (c, p1, p2, p3)."""
    b, c, f, h, w = x.shape
    p1, p2, p3 = stride
    x = x.reshape(b, c, f // p1, p1, h // p2, p2, w // p3, p3)
    return x.permute(0, 1, 3, 5, 7, 2, 4, 6).reshape(b, c * p1 * p2 * p3, f // p1, h // p2, w // p3)


def depth_to_space(x: torch.Tensor, stride: tuple[int, int, int]) -> torch.Tensor:
    """(B, C·p1·p2·p3, F, H, W) -> (B, C, F·p1, H·p2, W·p3), the inverse of `space_to_depth`."""
    b, c, f, h, w = x.shape
    p1, p2, p3 = stride
    x = x.reshape(b, c // (p1 * p2 * p3), p1, p2, p3, f, h, w)
    return x.permute(0, 1, 5, 2, 6, 3, 7, 4).reshape(b, c // (p1 * p2 * p3), f * p1, h * p2, w * p3)


class SpaceToDepthDownsample(nn.Module):
    """Encoder ×2 downsampling: conv to C_out/∏stride, space-to-depth, plus a parameter-free skip
    (space-to-depth of the input averaged over channel groups). Time stride 2 first repeats frame 0."""

    def __init__(self, in_channels: int, out_channels: int, stride: tuple[int, int, int], padding_mode: str) -> None:
        super().__init__()
        self.stride = stride
        self.group_size = in_channels * math.prod(stride) // out_channels
        self.conv = CausalConv3d(in_channels, out_channels // math.prod(stride), padding_mode)

    def forward(self, x: torch.Tensor, causal: bool = True) -> torch.Tensor:
        if self.stride[0] == 2:
            x = torch.cat((x[:, :, :1], x), dim=2)
        skip = space_to_depth(x, self.stride)
        skip = skip.unflatten(1, (-1, self.group_size)).mean(dim=2)
        return space_to_depth(self.conv(x, causal), self.stride).add_(skip)


class DepthToSpaceUpsample(nn.Module):
    """Decoder ×2 upsampling: conv to ∏stride·C/multiplier, depth-to-space, first frame dropped when time-strided.

    The residual form adds the depth-to-space of the input repeated ∏stride/multiplier times along channels. Here
    that is a broadcast add of a strided view into the rearranged output, so neither the repeat nor the input's
    rearrangement is materialised, and the dropped frame is a view, not a copy.
    """

    def __init__(self, in_channels: int, stride: tuple[int, int, int], multiplier: int, residual: bool,
                 padding_mode: str) -> None:
        super().__init__()
        self.stride = stride
        self.residual = residual
        self.conv = CausalConv3d(in_channels, math.prod(stride) * in_channels // multiplier, padding_mode)

    def forward(self, x: torch.Tensor, causal: bool) -> torch.Tensor:
        out = depth_to_space(self.conv(x, causal), self.stride)
        if self.residual:
            b, c, f, h, w = x.shape
            p1, p2, p3 = self.stride
            skip = x.view(b, 1, c // (p1 * p2 * p3), p1, p2, p3, f, h, w).permute(0, 1, 2, 6, 3, 7, 4, 8, 5)
            out.view(b, -1, *skip.shape[2:]).add_(skip)
        return out[:, :, 1:] if self.stride[0] == 2 else out
