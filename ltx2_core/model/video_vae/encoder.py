"""Video VAE encoder (spec §3): RGB video in [−1, 1] -> normalised latent means, for image/video conditioning."""

from __future__ import annotations

import torch
from torch import nn

from ltx2_core.geometry import VIDEO_SPACE_SCALE as SCALE_SPACE, VIDEO_TIME_SCALE as SCALE_TIME, is_video_size
from ltx2_core.model.statistics import PerChannelStatistics
from ltx2_core.model.video_vae.config import LOG_VARIANCE_CHANNELS, VideoVaeConfig
from ltx2_core.model.video_vae.layers import (
    CausalConv3d,
    ResBlockStack,
    SpaceToDepthDownsample,
    norm_act_into,
)


class VideoEncoder(nn.Module):
    """patchify ×4 → conv_in → down_blocks → pixel-norm, SiLU → conv_out; means normalised. Causal in time."""

    def __init__(self, config: VideoVaeConfig) -> None:
        super().__init__()
        self.config = config
        padding = config.encoder_padding
        channels = config.latent_channels
        self.conv_in = CausalConv3d(config.in_channels * config.patch_size**2, channels, padding)
        blocks: list[nn.Module] = []
        for block in config.encoder_blocks:
            if block.kind == "res_x":
                blocks.append(ResBlockStack(channels, block.layers, padding, timestep_conditioning=False))
            else:
                blocks.append(SpaceToDepthDownsample(channels, channels * block.multiplier, block.stride, padding))
                channels *= block.multiplier
        self.down_blocks = nn.ModuleList(blocks)
        extra = LOG_VARIANCE_CHANNELS[config.log_variance]
        out_channels = config.latent_channels + (config.latent_channels if extra is None else extra)
        self.conv_out = CausalConv3d(channels, out_channels, padding)
        self.per_channel_statistics = PerChannelStatistics(config.latent_channels)

    @torch.no_grad()  # inference only: the padded buffers are written in place, which autograd cannot follow
    def forward(self, video: torch.Tensor) -> torch.Tensor:
        """video (B, 3, 1+8k, 32·h, 32·w) in [−1, 1] -> normalised means (B, 128, 1+k, h, w)."""
        check_video(video, self.config)
        x = _patchify(video, self.config.patch_size)
        x = self.conv_in(x, causal=True)
        for block in self.down_blocks:
            x = block(x, causal=True)
        buffer, interior = self.conv_out.buffer(x, causal=True)
        norm_act_into(interior, x)
        x = self.conv_out.run(buffer, causal=True)
        # only the means are used: the first `latent_channels` outputs whatever the log-variance layout
        return self.per_channel_statistics.normalize(x[:, : self.config.latent_channels])


def _patchify(video: torch.Tensor, patch: int) -> torch.Tensor:
    """(B, C, F, H·q, W·r) -> (B, C·r·q, F, H, W): the w-offset r is the slower index (the reference's order)."""
    b, c, f, h, w = video.shape
    x = video.reshape(b, c, f, h // patch, patch, w // patch, patch)
    return x.permute(0, 1, 6, 4, 2, 3, 5).reshape(b, c * patch * patch, f, h // patch, w // patch)


def check_video(video: torch.Tensor, config: VideoVaeConfig) -> None:
    """ValueError naming the fix unless video is (B, 3, 1+8k, 32·h, 32·w) floating point."""
    expected = f"(B, {config.in_channels}, 1+{SCALE_TIME}k frames, H, W) with H and W multiples of {SCALE_SPACE}"
    if video.dim() != 5 or video.shape[1] != config.in_channels or not video.is_floating_point():
        raise ValueError(f"video to encode must be a floating tensor {expected}; got {list(video.shape)} {video.dtype}")
    frames, height, width = video.shape[2:]
    if not is_video_size(frames, height, width):
        raise ValueError(f"video to encode must be {expected}; got {frames} frames of {height}×{width}. Trim the "
                         f"video to 1+{SCALE_TIME}k frames and resize or crop it to multiples of {SCALE_SPACE}.")
