"""Latent upsamplers (spec §5): a Conv3d ResNet that enlarges VAE latents per frame in H and W (spatial), or doubles
their frames (temporal).

The released files are ×2 only: LTX-2.0's `ltx-2-spatial-upscaler-x2-1.0` uses the rational resampler (conv,
PixelShuffle(2), no blur since the denominator is 1), LTX-2.3's `…-x2-1.1` the plain form (conv, PixelShuffle(2)).
The rational form is implemented for every scale the reference knows (0.75, 1.5, 2, 4). Parameter names are the
file's, so loading is a plain state-dict match.

The temporal form (`spatial_upsample` false, `temporal_upsample` true: DFR's x2 file, not public yet) has a Conv3d to
2·mid channels, a 1-D pixel shuffle of those into twice the frames, and drops the first output frame (the first latent
frame holds one pixel frame): F latent frames become 2F - 1. Both forms together (a 3-D shuffle in the reference) are
in no file and refused.

The model runs on un-normalised latents; `upsample_latent` wraps it with the video VAE's statistics.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ltx2_core.errors import ConfigError
from ltx2_core.model.statistics import PerChannelStatistics

GROUPS = 32  # GroupNorm groups of every norm (fixed in the reference)
BLUR_SIZE = 5
# spatial scale -> (PixelShuffle factor, blur stride) of the rational resampler
RATIONAL_SCALES = {0.75: (3, 4), 1.5: (3, 2), 2.0: (2, 1), 4.0: (4, 1)}
# keys the released files carry with the only value this architecture has
_FIXED = {"_class_name": "LatentUpsampler", "dims": 3}
# (spatial_upsample, temporal_upsample) -> temporal; the reference's defaults are (True, False)
_DIRECTIONS = {(True, False): False, (False, True): True}
# missing keys take the reference configurator's defaults, so both build the same model from the same metadata
_DEFAULTS = {"in_channels": 128, "mid_channels": 512, "num_blocks_per_stage": 4, "spatial_scale": 2.0,
             "rational_resampler": False}


@dataclass(frozen=True)
class UpsamplerConfig:
    """The latent upsampler of one file: widths, blocks per stage (before and after upsampling), and the scale."""

    in_channels: int
    mid_channels: int
    num_blocks_per_stage: int
    spatial_scale: float
    rational_resampler: bool
    temporal: bool = False  # doubles the frames instead of H and W (the scale and resampler then play no part)

    @classmethod
    def from_metadata(cls, flat: Mapping[str, Any]) -> UpsamplerConfig:
        """From the file's flat `config` metadata; every unsupported value is reported in one ConfigError."""
        if not isinstance(flat, Mapping):
            raise ConfigError(f"the upsampler config must be a JSON object, found {type(flat).__name__}")
        problems = _check(flat)
        if problems:
            raise ConfigError("unsupported latent upsampler config: " + "; ".join(problems))
        values = {key: flat.get(key, default) for key, default in _DEFAULTS.items()}
        temporal = _DIRECTIONS[(flat.get("spatial_upsample", True), flat.get("temporal_upsample", False))]
        return cls(**{**values, "spatial_scale": float(values["spatial_scale"]), "temporal": temporal})

    def to_metadata(self) -> dict[str, Any]:
        """The flat `config` metadata in the released layout (inverse of `from_metadata`)."""
        return {**_FIXED, "spatial_upsample": not self.temporal, "temporal_upsample": self.temporal,
                "in_channels": self.in_channels, "mid_channels": self.mid_channels,
                "num_blocks_per_stage": self.num_blocks_per_stage, "spatial_scale": self.spatial_scale,
                "rational_resampler": self.rational_resampler}

    @classmethod
    def tiny(cls, rational_resampler: bool = True, spatial_scale: float = 2.0,
             temporal: bool = False) -> UpsamplerConfig:
        """16 latent channels, width 32 (one GroupNorm group per channel), one block per stage: for CPU tests."""
        return cls(in_channels=16, mid_channels=GROUPS, num_blocks_per_stage=1, spatial_scale=spatial_scale,
                   rational_resampler=rational_resampler and not temporal, temporal=temporal)


def _check(flat: Mapping[str, Any]) -> list[str]:
    """Every unsupported value, as 'key=value (supported: …)' strings."""
    problems = [f"{key}={flat[key]!r} (supported: {value!r})"
                for key, value in _FIXED.items() if key in flat and flat[key] != value]
    for key, minimum in (("in_channels", 1), ("mid_channels", GROUPS), ("num_blocks_per_stage", 0)):
        value = flat.get(key, _DEFAULTS[key])
        if not _is_int(value) or value < minimum:
            problems.append(f"{key}={value!r} (must be an integer >= {minimum})")
        elif key == "mid_channels" and value % GROUPS:
            problems.append(f"mid_channels={value!r} (must be a multiple of {GROUPS}, the GroupNorm groups)")
    direction = (flat.get("spatial_upsample", True), flat.get("temporal_upsample", False))
    if direction not in _DIRECTIONS:
        problems.append(f"spatial_upsample={direction[0]!r} with temporal_upsample={direction[1]!r} (supported: "
                        "spatial_upsample true for a spatial file, or temporal_upsample true for a temporal one)")
        return problems
    rational = flat.get("rational_resampler", _DEFAULTS["rational_resampler"])
    scale = flat.get("spatial_scale", _DEFAULTS["spatial_scale"])
    if _DIRECTIONS[direction]:  # the reference's temporal form ignores the scale and the resampler
        return problems
    if not isinstance(rational, bool):
        problems.append(f"rational_resampler={rational!r} (supported: true, false)")
    elif rational and (not _is_number(scale) or float(scale) not in RATIONAL_SCALES):
        problems.append(f"spatial_scale={scale!r} (supported with rational_resampler: "
                        f"{', '.join(map(str, RATIONAL_SCALES))})")
    elif not rational and (not _is_number(scale) or float(scale) != 2.0):
        # the reference ignores the scale here and always doubles; a different value means a misdescribed file
        problems.append(f"spatial_scale={scale!r} (supported without rational_resampler: 2.0)")
    return problems


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class ResBlock(nn.Module):
    """conv-GN-SiLU-conv-GN, SiLU after the residual add; (B, C, F, H, W) -> same shape."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv3d(channels, channels, kernel_size=3, padding=1)
        self.norm1 = nn.GroupNorm(GROUPS, channels)
        self.conv2 = nn.Conv3d(channels, channels, kernel_size=3, padding=1)
        self.norm2 = nn.GroupNorm(GROUPS, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.silu(self.norm1(self.conv1(x)))
        h = self.norm2(self.conv2(h))
        return F.silu(h + x)


def binomial_kernel(size: int = BLUR_SIZE) -> torch.Tensor:
    """The normalised size×size binomial (Pascal row outer product, sum 1), (1, 1, size, size) float32."""
    row = torch.tensor([math.comb(size - 1, k) for k in range(size)], dtype=torch.float64)
    k2d = torch.outer(row, row)
    return (k2d / k2d.sum()).float()[None, None]


class BlurDownsample(nn.Module):
    """Depthwise binomial blur with stride: anti-aliased downsampling of (N, C, H, W)."""

    def __init__(self, stride: int) -> None:
        super().__init__()
        self.stride = stride
        # a constant: recomputed instead of read, so files without it load (the reference needs it in the file)
        self.register_buffer("kernel", binomial_kernel(), persistent=False)

    def reset_buffers(self, device: torch.device | str) -> None:
        """Rebuilds the kernel after a meta-device build (called by the component loader)."""
        self.kernel = binomial_kernel().to(device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            # the reference skips the blur without downsampling, and the ×2/×4 weights were trained that way
            return x
        channels = x.shape[1]
        weight = self.kernel.to(x.dtype).expand(channels, 1, BLUR_SIZE, BLUR_SIZE)
        return F.conv2d(x, weight, stride=self.stride, padding=BLUR_SIZE // 2, groups=channels)


class RationalResampler(nn.Module):
    """Scale by num/den: conv to num²·C, PixelShuffle(num), blur with stride den. (N, C, H, W) -> (N, C, H', W')."""

    def __init__(self, channels: int, scale: float) -> None:
        super().__init__()
        num, den = RATIONAL_SCALES[scale]
        self.conv = nn.Conv2d(channels, num * num * channels, kernel_size=3, padding=1)
        self.pixel_shuffle = nn.PixelShuffle(num)
        self.blur_down = BlurDownsample(den)  # name from the file: `upsampler.blur_down.kernel`

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blur_down(self.pixel_shuffle(self.conv(x)))


def _plain_upsampler(channels: int) -> nn.Sequential:
    """Conv2d to 4·C then PixelShuffle(2) (`b (c p1 p2) h w -> b c (h p1) (w p2)`); file keys `upsampler.0.*`."""
    return nn.Sequential(nn.Conv2d(channels, 4 * channels, kernel_size=3, padding=1), nn.PixelShuffle(2))


class TemporalShuffle(nn.Module):
    """1-D pixel shuffle over frames: (B, 2·C, F, H, W) -> (B, C, 2F, H, W), channel c·2 + p to frame f·2 + p."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c2, f, h, w = x.shape
        return x.unflatten(1, (c2 // 2, 2)).transpose(2, 3).reshape(b, c2 // 2, 2 * f, h, w)


def _temporal_upsampler(channels: int) -> nn.Sequential:
    """Conv3d to 2·C then the temporal shuffle; file keys `upsampler.0.*`."""
    return nn.Sequential(nn.Conv3d(channels, 2 * channels, kernel_size=3, padding=1), TemporalShuffle())


def _per_frame(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Applies a 2-D module to every frame: (B, C, F, H, W) -> (B, C', F, H', W')."""
    b, c, f, h, w = x.shape
    y = module(x.transpose(1, 2).reshape(b * f, c, h, w))
    return y.unflatten(0, (b, f)).transpose(1, 2)


class LatentUpsampler(nn.Module):
    """(B, in, F, H, W) un-normalised latent -> (B, in, F, H·s, W·s), s = 2 for the released files; the temporal
    form: -> (B, in, 2F - 1, H, W)."""

    def __init__(self, config: UpsamplerConfig) -> None:
        super().__init__()
        self.config = config
        mid = config.mid_channels
        self.initial_conv = nn.Conv3d(config.in_channels, mid, kernel_size=3, padding=1)
        self.initial_norm = nn.GroupNorm(GROUPS, mid)
        self.res_blocks = nn.ModuleList(ResBlock(mid) for _ in range(config.num_blocks_per_stage))
        if config.temporal:
            self.upsampler: nn.Module = _temporal_upsampler(mid)
        elif config.rational_resampler:
            self.upsampler = RationalResampler(mid, config.spatial_scale)
        else:
            self.upsampler = _plain_upsampler(mid)
        self.post_upsample_res_blocks = nn.ModuleList(ResBlock(mid) for _ in range(config.num_blocks_per_stage))
        self.final_conv = nn.Conv3d(mid, config.in_channels, kernel_size=3, padding=1)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        x = F.silu(self.initial_norm(self.initial_conv(latent)))
        for block in self.res_blocks:
            x = block(x)
        if self.config.temporal:
            x = self.upsampler(x)[:, :, 1:]  # the first latent frame stands for one pixel frame: one copy of it
        else:
            x = _per_frame(self.upsampler, x)
        for block in self.post_upsample_res_blocks:
            x = block(x)
        return self.final_conv(x)


def check_latent(latent: torch.Tensor, channels: int) -> None:
    """ValueError unless `latent` is (B, channels, F, H, W) with no empty dimension."""
    if latent.dim() != 5 or latent.shape[1] != channels or latent.numel() == 0:
        raise ValueError(f"the upsampler takes a video latent of shape (B, C, F, H, W) with C={channels}, got "
                         f"{tuple(latent.shape)}; pass the video latent (not the audio latent or decoded frames)")


def upsample_latent(
    latent: torch.Tensor, upsampler: LatentUpsampler, statistics: PerChannelStatistics
) -> torch.Tensor:
    """(B, C, F, H, W) normalised latent -> (B, C, F, H·s, W·s) normalised latent (s = 2 for the released files),
    or (B, C, 2F - 1, H, W) with a temporal upsampler.

    The upsampler was trained on un-normalised latents, so the video VAE's statistics are undone first and
    re-applied after. It runs in the upsampler's dtype; the result has the latent's dtype.
    """
    check_latent(latent, upsampler.config.in_channels)
    weight = upsampler.initial_conv.weight
    x = statistics.un_normalize(latent, dim=1).to(weight.dtype)
    x = upsampler(x).to(latent.dtype)
    return statistics.normalize(x, dim=1)
