"""The LTX-2.5 diffusion video decoder: normalised latent (B, 128, F', H', W') -> RGB video in [−1, 1].

Stages 1-4 are deterministic neighborhood-attention transformers, each followed by a linear pixel-shuffle upsample,
turning the latent into a context volume on the stage-5 grid (pixel frames, pixels / patch). Stage 5 then
denoises patchified Gaussian pixels in `steps` Euler steps over t = linspace(1, 1/steps, steps) (a last step to
t = 0), each step reading the context through every block's `context_proj` and t through a shared AdaLN.

Edge handling follows the reference: latents below `latent_floor()` are edge-padded (time: repeat the last frame,
space: replicate both edges), the last latent frame is replicated twice more for the stage-1-4 attention windows and
that appendix is cropped off the context before stage 5; the padding is cropped off the pixels at the end.
Everything inside is channels-last (B, T, H, W, C).
"""

from __future__ import annotations

import torch
from torch import nn

from ltx2_core.model.statistics import PerChannelStatistics
from ltx2_core.model.transformer.adaln import TimestepEmbedding
from ltx2_core.model.video_vae.diffusion_blocks import DiffusionBlock, NABlock, PixelShuffleUpsample, SharedAdaLN
from ltx2_core.model.video_vae.diffusion_config import DiffusionDecoderConfig
from ltx2_core.model.video_vae.diffusion_geometry import resize_axis, symmetric_pad
from ltx2_core.model.video_vae.diffusion_tiling import SpatialTiling, decode_tiles


class DiffusionVideoDecoder(nn.Module):
    def __init__(self, config: DiffusionDecoderConfig) -> None:
        super().__init__()
        self.config = config
        c = config
        self.per_channel_statistics = PerChannelStatistics(c.latent_channels)
        self.conv_in = nn.Linear(c.latent_channels, c.stage_channels[0])
        self.det_stages = nn.ModuleList(
            nn.ModuleList(NABlock(c.stage_channels[i], c.stage_kernels[i], c.head_dim)
                          for _ in range(c.stage_depths[i])) for i in range(4))
        self.upsamples = nn.ModuleList(PixelShuffleUpsample(c.stage_channels[i], *c.upsamples[i]) for i in range(4))
        self.t_embedder = TimestepEmbedding(c.t_emb_dim)
        width, pixels = c.diffusion_channels, c.out_channels * c.patch_size**2
        self.conv_in_x_t = nn.Linear(pixels, width)
        self.shared_adaln = SharedAdaLN(width, c.t_emb_dim)
        self.diff_blocks = nn.ModuleList(DiffusionBlock(width, c.stage5_kernel, c.stage_channels[-1], c.head_dim)
                                         for _ in range(c.stage_depths[-1]))
        self.norm_out = nn.RMSNorm(width, eps=1e-6)
        self.conv_out = nn.Linear(width, pixels)

    @property
    def trailing_latent_frames(self) -> int:
        """Latent frames replicated after the last one for stages 1-4 (the window border workaround)."""
        return self.config.stage_kernels[0][0] // 2 * 2

    def pixel_shape(self, latent_shape: tuple[int, ...]) -> tuple[int, int, int, int, int]:
        """(B, C, F', H', W') -> (B, 3, 8(F'−1)+1, 32·H', 32·W')."""
        b, _, f, h, w = latent_shape
        c = self.config
        return b, c.out_channels, c.time_scale * (f - 1) + 1, c.space_scale * h, c.space_scale * w

    def noise_shape(self, latent_shape: tuple[int, ...]) -> tuple[int, int, int, int, int]:
        """Shape of the starting noise for a latent: the pixel shape of the latent padded to `latent_floor()`."""
        b, ch, *size = latent_shape
        return self.pixel_shape((b, ch, *(max(n, m) for n, m in zip(size, self.config.latent_floor()))))

    def forward(self, latent: torch.Tensor, generator: torch.Generator | None = None,
                noise: torch.Tensor | None = None, tiling: SpatialTiling | None = None) -> torch.Tensor:
        """latent (B, 128, F', H', W') normalised -> video (B, 3, 8(F'−1)+1, 32·H', 32·W') in [−1, 1], the
        latent's dtype. The starting noise is `noise` (shape `noise_shape`) or drawn from `generator` (on the
        generator's device, in the latent's dtype: the reference's draw); `tiling` splits stages 4-5 spatially."""
        return decode_tiles(self, latent, tiling, generator=generator, noise=noise)

    def draw_noise(self, latent: torch.Tensor, generator: torch.Generator | None,
                   noise: torch.Tensor | None) -> torch.Tensor:
        """The starting pixels noise for the floor-padded latent: `noise` checked, or one draw."""
        shape = self.noise_shape(tuple(latent.shape))
        if noise is not None:
            if tuple(noise.shape) != shape:
                raise ValueError(f"decode noise must have shape {list(shape)} (noise_shape of the latent); got "
                                 f"{list(noise.shape)}")
            return noise.to(device=latent.device, dtype=latent.dtype)
        device = generator.device if generator is not None else latent.device
        return torch.randn(shape, generator=generator, dtype=latent.dtype, device=device).to(latent.device)

    def pad_latent(self, latent: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int]]:
        """Edge-pads the latent to `latent_floor()`; returns it and the (top, left) pad in latent cells."""
        floor = self.config.latent_floor()
        latent, _ = resize_axis(latent, 2, max(latent.shape[2], floor[0]), symmetric=False)
        latent, top = symmetric_pad(latent, 3, floor[1])
        latent, left = symmetric_pad(latent, 4, floor[2])
        return latent, (top, left)

    def stages_1_to_3(self, latent: torch.Tensor) -> torch.Tensor:
        """Floor-padded normalised latent (B, C, F', H', W') -> stage-4 input (B, T4, H4, W4, C4), the trailing
        frames replicated first."""
        latent = resize_axis(latent, 2, latent.shape[2] + self.trailing_latent_frames, symmetric=False)[0]
        x = self.conv_in(self.per_channel_statistics.un_normalize(latent).permute(0, 2, 3, 4, 1))
        for i in range(3):
            x = self._stage(x, i, drop_leading_frame=True)
        return x

    def _stage(self, x: torch.Tensor, index: int, drop_leading_frame: bool) -> torch.Tensor:
        for block in self.det_stages[index]:
            x = block(x)
        return self.upsamples[index](x, drop_leading_frame)

    def context(self, feature: torch.Tensor, is_origin: bool, trailing: bool) -> torch.Tensor:
        """Stage 4 on a stage-4-input tile -> context (B, T5, H5, W5, C_ctx); a tile that ends with the video has
        the replicated appendix cropped (never below the stage-5 kernel)."""
        x = self._stage(feature, 3, is_origin)
        if trailing and self.trailing_latent_frames:
            content = max(x.shape[1] - self.trailing_latent_frames * self.config.time_scale, 1)
            x = x[:, :min(x.shape[1], max(content, self.config.stage5_kernel[0]))]
        return x

    def denoise(self, context: torch.Tensor, x_t: torch.Tensor) -> torch.Tensor:
        """Stage 5: context (B, T, H/p, W/p, C_ctx), noise x_t (B, 3, T, H, W) -> pixels (B, 3, T, H, W) in x_t's
        dtype, Euler in fp32 over the reference schedule."""
        c = self.config
        steps = torch.linspace(1.0, 1.0 / c.steps, c.steps, device="cpu").to(x_t.device)
        times = [*steps.unbind(), torch.zeros((), device=x_t.device)]
        for i in range(c.steps):
            t = times[i].expand(x_t.shape[0])
            prediction = self._predict(context, x_t, t).float()
            if i == c.steps - 1 and c.model_output_type == "x0":
                return prediction.to(x_t.dtype)
            if c.model_output_type == "x0":  # velocity of the x0 prediction: (x_t − x0) / t
                prediction = (x_t.float() - prediction) / t.float().view(-1, 1, 1, 1, 1)
            x_t = (x_t.float() - (times[i] - times[i + 1]).float() * prediction).to(x_t.dtype)
        return x_t

    def _predict(self, context: torch.Tensor, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        p = self.config.patch_size
        b, ch, f, h, w = x_t.shape
        # patchify per frame, channel order (c, r, q) for an (h q) (w r) split
        patches = x_t.view(b, ch, f, h // p, p, w // p, p).permute(0, 2, 3, 5, 1, 6, 4)
        patches = patches.reshape(b, f, h // p, w // p, -1)
        x = self.conv_in_x_t(patches)
        embedding = self.t_embedder(self.config.timestep_scale_multiplier * t, x.dtype)
        modulation = self.shared_adaln(embedding)
        for block in self.diff_blocks:
            x = block(x, context, modulation)
        out = self.conv_out(self.norm_out(x))
        out = out.view(b, f, h // p, w // p, ch, p, p).permute(0, 4, 1, 2, 6, 3, 5)
        return out.reshape(b, ch, f, h, w)
