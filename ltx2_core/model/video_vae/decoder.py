"""Video VAE decoder (spec §3): normalised latent (B, 128, F', H', W') -> RGB video in [−1, 1].

`forward` = `prepare` (optional decode noise, un-normalise; elementwise, so tiling applies it once to the whole
latent) + `decode_prepared` (the network). Both released decoders are deterministic (`timestep_conditioning`
false); the conditioned path (decode noise 0.025, decode timestep 0.05 × a learnable 1000, AdaLN in every residual
block and after the last norm) is built when a config asks for it.
"""

from __future__ import annotations

import torch
from torch import nn

from ltx2_core.geometry import VIDEO_SPACE_SCALE as SCALE_SPACE, VIDEO_TIME_SCALE as SCALE_TIME
from ltx2_core.model.statistics import PerChannelStatistics
from ltx2_core.model.transformer.adaln import TimestepEmbedding
from ltx2_core.model.video_vae.config import VideoVaeConfig
from ltx2_core.model.video_vae.layers import CausalConv3d, DepthToSpaceUpsample, ResBlockStack, norm_act_into

DECODE_NOISE_SCALE = 0.025
DECODE_TIMESTEP = 0.05


class VideoDecoder(nn.Module):
    def __init__(self, config: VideoVaeConfig) -> None:
        super().__init__()
        self.config = config
        padding, conditioned = config.decoder_padding, config.timestep_conditioning
        channels = config.decoder_channels
        self.conv_in = CausalConv3d(config.latent_channels, channels, padding)
        blocks: list[nn.Module] = []
        for block in config.decoder_blocks:
            if block.kind == "res_x":
                blocks.append(ResBlockStack(channels, block.layers, padding, conditioned))
            else:
                blocks.append(DepthToSpaceUpsample(channels, block.stride, block.multiplier, block.residual, padding))
                channels //= block.multiplier
        self.up_blocks = nn.ModuleList(blocks)
        self.conv_out = CausalConv3d(channels, config.out_channels * config.patch_size**2, padding)
        self.per_channel_statistics = PerChannelStatistics(config.latent_channels)
        if conditioned:
            self.timestep_scale_multiplier = nn.Parameter(torch.tensor(1000.0))
            self.last_time_embedder = TimestepEmbedding(2 * channels)
            self.last_scale_shift_table = nn.Parameter(torch.zeros(2, channels))

    @torch.no_grad()  # inference only: the padded buffers are written in place, which autograd cannot follow
    def forward(self, latent: torch.Tensor, generator: torch.Generator | None = None,
                timestep: torch.Tensor | None = None) -> torch.Tensor:
        """latent (B, 128, F', H', W') normalised -> video (B, 3, 8(F'−1)+1, 32·H', 32·W') in [−1, 1].

        `generator` seeds the decode noise and `timestep` (B,) overrides 0.05; both only matter with timestep
        conditioning.
        """
        return self.decode_prepared(self.prepare(latent, generator), timestep)

    def prepare(self, latent: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Checks the latent, mixes in the decode noise when conditioned, and un-normalises."""
        check_latent(latent, self.config.latent_channels)
        if self.config.decoder_padding == "reflect" and min(latent.shape[3:]) < 2:
            raise ValueError(
                f"this VAE decoder (reflect padding, LTX-2.0) needs latents of at least 2×2 cells, i.e. videos of at "
                f"least {2 * SCALE_SPACE}×{2 * SCALE_SPACE} px; got a {latent.shape[3]}×{latent.shape[4]} latent. "
                "Generate a larger video."
            )
        if self.config.timestep_conditioning:
            noise = torch.randn(latent.shape, generator=generator, dtype=latent.dtype, device=latent.device)
            latent = noise * DECODE_NOISE_SCALE + (1.0 - DECODE_NOISE_SCALE) * latent
        return self.per_channel_statistics.un_normalize(latent)

    @torch.no_grad()
    def decode_prepared(self, z: torch.Tensor, timestep: torch.Tensor | None = None,
                        dtype: torch.dtype | None = None) -> torch.Tensor:
        """Un-normalised latent (B, 128, F', H', W') -> video (B, 3, 8(F'−1)+1, 32·H', 32·W') in `dtype`
        (default: the latent's), written once: the un-patchify and the cast are one copy."""
        causal = self.config.causal_decoder
        scaled = self._scaled_timestep(z, timestep)
        x = self.conv_in(z, causal)
        for block in self.up_blocks:
            x = block(x, causal, scaled) if isinstance(block, ResBlockStack) else block(x, causal)
        shift_scale = None
        if scaled is not None:
            embedded = self.last_time_embedder(scaled, x.dtype).unflatten(1, (2, -1))
            shift_scale = (self.last_scale_shift_table.to(x.dtype)[None] + embedded)[..., None, None, None].unbind(1)
        buffer, interior = self.conv_out.buffer(x, causal)
        norm_act_into(interior, x, shift_scale)
        del x, interior
        patches = self.conv_out.run(buffer, causal)
        del buffer
        return _unpatchify(patches, self.config.patch_size, dtype or z.dtype)

    def _scaled_timestep(self, z: torch.Tensor, timestep: torch.Tensor | None) -> torch.Tensor | None:
        if not self.config.timestep_conditioning:
            return None
        if timestep is None:
            timestep = torch.full((z.shape[0],), DECODE_TIMESTEP, dtype=z.dtype, device=z.device)
        return timestep * self.timestep_scale_multiplier.to(z.dtype)


def _unpatchify(x: torch.Tensor, patch: int, dtype: torch.dtype) -> torch.Tensor:
    """(B, C·r·q, F, H, W) -> (B, C, F, H·q, W·r) in `dtype`, the inverse of the encoder's patchify."""
    b, c, f, h, w = x.shape
    c //= patch * patch
    out = x.new_empty(b, c, f, h * patch, w * patch, dtype=dtype)
    # (b, c, r, q, f, h, w) read in the output's (b, c, f, h, q, w, r) order
    out.view(b, c, f, h, patch, w, patch).copy_(x.view(b, c, patch, patch, f, h, w).permute(0, 1, 4, 5, 3, 6, 2))
    return out


def check_latent(latent: torch.Tensor, channels: int) -> None:
    """ValueError naming the expected layout unless latent is a floating (B, channels, F', H', W') tensor."""
    if latent.dim() != 5 or latent.shape[1] != channels or not latent.is_floating_point() or 0 in latent.shape:
        raise ValueError(
            f"video latent must be a floating tensor (B, {channels}, F', H', W') (F' = (frames−1)/{SCALE_TIME}+1, "
            f"H' = height/{SCALE_SPACE}, W' = width/{SCALE_SPACE}); got {list(latent.shape)} {latent.dtype}. Pass the "
            "video latent of this model (not the audio latent, not a patchified token sequence)."
        )
