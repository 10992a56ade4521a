"""A preview frame per denoising step (for ComfyUI's progress bar), without ever waiting on the device.

Each step's middle latent frame is projected to RGB by a linear map (fitted once per VAE decoder: random latents
decoded, block-mean colours regressed on the latent channels), on the device; the small uint8 image is copied to
pinned host memory asynchronously with an event recorded behind it. The next step shows it if the event has
completed (a query, not a wait), so previews lag one step and the host stays ahead of the device.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import numpy as np
import torch

from ltx2_core.geometry import VIDEO_SPACE_SCALE, latent_shape
from ltx2_core.model.video_vae import VideoDecoder

FIT_CELLS = 16  # a 16×16-cell latent frame (512×512 px) gives 256 colour samples for 129 unknowns per channel
RIDGE = 1e-2
_PROJECTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@torch.no_grad()
def rgb_projection(decoder: VideoDecoder, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(weight (128, 3), bias (3,)) in fp32 mapping a normalised latent cell to its decoded RGB in [0, 1]."""
    if decoder in _PROJECTIONS:
        return _PROJECTIONS[decoder]
    param = next(decoder.parameters())
    generator = torch.Generator(param.device).manual_seed(seed)
    channels = decoder.config.latent_channels
    latent = torch.randn(1, channels, 1, FIT_CELLS, FIT_CELLS, generator=generator, device=param.device,
                         dtype=param.dtype)
    video = decoder(latent, generator=generator).float()  # (1, 3, 1, 32·cells, 32·cells) in [-1, 1]
    colours = video.reshape(3, FIT_CELLS, video.shape[-2] // FIT_CELLS, FIT_CELLS, -1).mean((2, 4))
    x = torch.cat([latent.float().reshape(channels, -1).T, latent.new_ones(FIT_CELLS**2, 1, dtype=torch.float32)], 1)
    y = (colours.reshape(3, -1).T + 1) / 2
    solution = torch.linalg.solve(x.T @ x + RIDGE * torch.eye(channels + 1, device=x.device), x.T @ y)
    _PROJECTIONS[decoder] = (solution[:-1], solution[-1])
    return _PROJECTIONS[decoder]


class LatentPreview:
    """`observe` (a denoise observer) queues a step's preview; `ready()` returns the newest one whose copy to the
    host has finished (None if none has), dropping older ones. `projection`: `rgb_projection` of the decoder (it
    may be computed in another process: multi-device workers get it with their job)."""

    def __init__(self, projection: tuple[torch.Tensor, torch.Tensor], frames: int, rows: int, cols: int) -> None:
        self.projection = self.weight, self.bias = projection
        self.frame = slice((frames // 2) * rows * cols, (frames // 2 + 1) * rows * cols)
        self.shape = (rows, cols, 3)
        self.pending: list[tuple[torch.Tensor, torch.cuda.Event | None]] = []

    def observe(self, video_tokens: torch.Tensor, audio_tokens: torch.Tensor) -> None:
        cells = video_tokens[0, self.frame].float()
        weight, bias = self.weight.to(cells.device), self.bias.to(cells.device)
        image = (cells @ weight + bias).clamp(0, 1).mul(255).to(torch.uint8).reshape(self.shape)
        if image.is_cuda:
            host = torch.empty(self.shape, dtype=torch.uint8, pin_memory=True)
            host.copy_(image, non_blocking=True)
            event = torch.cuda.Event()
            event.record()
            self.pending.append((host, event))
        else:
            self.pending.append((image, None))

    def ready(self) -> np.ndarray | None:
        done = [i for i, (_, event) in enumerate(self.pending) if event is None or event.query()]
        if not done:
            return None
        image = self.pending[done[-1]][0]
        del self.pending[: done[-1] + 1]
        return image.numpy()


class StagePreviews:
    """The sampler's per-step previews across a generation's stages: a two-stage run samples at half size first,
    so each stage's latent size has its own LatentPreview (told apart by the token count). `frames`: the clip's
    pixel frames, or each window's (a long clip's windows, the last one shorter)."""

    def __init__(self, projection: tuple[torch.Tensor, torch.Tensor], frames: int | Sequence[int], height: int,
                 width: int) -> None:
        self.projection = projection
        counts = {latent_shape(f, height, width)[0] for f in ((frames,) if isinstance(frames, int) else frames)}
        self.sizes = sorted({(latent_frames * (height // s) * (width // s), latent_frames, height // s, width // s)
                             for latent_frames in counts
                             for s in (VIDEO_SPACE_SCALE, 2 * VIDEO_SPACE_SCALE) if height // s and width // s})
        self.previews = {size[0]: LatentPreview(projection, *size[1:]) for size in self.sizes}
        self.current: LatentPreview | None = None

    def observe(self, video_tokens: torch.Tensor, audio_tokens: torch.Tensor) -> None:
        fitting = [count for count, *_ in self.sizes if count <= video_tokens.shape[1]]  # keyframe tokens follow
        if fitting:
            self.current = self.previews[fitting[-1]]
            self.current.observe(video_tokens, audio_tokens)

    def ready(self) -> np.ndarray | None:
        return self.current.ready() if self.current is not None else None
