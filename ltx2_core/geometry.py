"""Latent layouts: patchify to tokens and back, and the token positions the transformer's RoPE reads (spec §1.2, §1.8).

Video latent (B, 128, F', H/32, W/32) <-> tokens (B, F'·H'·W', 128) in f, h, w raster order.
Audio latent (B, 8, T, 16) <-> tokens (B, T, 128) with feature index c·16 + mel_bin.
"""

from __future__ import annotations

import torch

VIDEO_TIME_SCALE = 8  # pixel frames per latent frame (the first latent frame holds one)
VIDEO_SPACE_SCALE = 32  # pixels per latent row / column
AUDIO_SAMPLE_RATE = 16000
AUDIO_HOP = 160  # mel frames every 10 ms
AUDIO_DOWNSAMPLE = 4  # mel frames per audio latent -> 25 latents per second


def check_video_size(frames: int, height: int, width: int) -> None:
    """ValueError naming the fix unless frames = 8k+1 and height, width are positive multiples of 32."""
    if frames < 1 or (frames - 1) % VIDEO_TIME_SCALE or height % VIDEO_SPACE_SCALE or width % VIDEO_SPACE_SCALE \
            or min(height, width) <= 0:
        raise ValueError(
            f"frames must be 8k+1 and sizes multiples of 32, got {frames} frames at {width}x{height} (width x height); "
            "e.g. 17 frames at 96x64 or 121 frames at 1280x768"
        )


def patchify_video(latent: torch.Tensor) -> torch.Tensor:
    """(B, C, F, H, W) -> (B, F·H·W, C)."""
    return latent.flatten(2).transpose(1, 2)


def unpatchify_video(tokens: torch.Tensor, frames: int, height: int, width: int) -> torch.Tensor:
    """(B, F·H·W, C) -> (B, C, F, H, W)."""
    return tokens.transpose(1, 2).unflatten(2, (frames, height, width))


def patchify_audio(latent: torch.Tensor) -> torch.Tensor:
    """(B, C, T, M) -> (B, T, C·M)."""
    return latent.transpose(1, 2).flatten(2)


def unpatchify_audio(tokens: torch.Tensor, channels: int) -> torch.Tensor:
    """(B, T, C·M) -> (B, C, T, M)."""
    return tokens.unflatten(2, (channels, -1)).transpose(1, 2)


def video_positions(
    frames: int, height: int, width: int, fps: float, device: torch.device | str | None = None
) -> torch.Tensor:
    """[start, end) bounds of every video token, (1, 3, F·H·W, 2): time in seconds, y and x in pixels.

    Latent frame f covers pixel frames [max(8f−7, 0), 8f+1) (the causal VAE keeps frame 0 alone).
    """
    grid = torch.meshgrid(
        torch.arange(frames, device=device), torch.arange(height, device=device), torch.arange(width, device=device),
        indexing="ij",
    )
    starts = torch.stack(grid).flatten(1).float()  # (3, tokens)
    bounds = torch.stack([starts, starts + 1], dim=-1)  # (3, tokens, 2)
    scale = torch.tensor([VIDEO_TIME_SCALE, VIDEO_SPACE_SCALE, VIDEO_SPACE_SCALE], device=device).view(3, 1, 1)
    pixels = bounds * scale
    time = (pixels[0] + 1 - VIDEO_TIME_SCALE).clamp(min=0) / fps
    return torch.cat([time[None], pixels[1:]])[None]


def audio_positions(tokens: int, device: torch.device | str | None = None) -> torch.Tensor:
    """[start, end) bounds in seconds of every audio token, (1, 1, T, 2).

    Latent n covers mel frames [max(4n−3, 0), 4n+1) (causal), 10 ms each.
    """
    def seconds(first: int) -> torch.Tensor:
        mel = torch.arange(first, first + tokens, dtype=torch.float32, device=device) * AUDIO_DOWNSAMPLE
        mel = (mel + 1 - AUDIO_DOWNSAMPLE).clip(min=0)
        return mel * AUDIO_HOP / AUDIO_SAMPLE_RATE

    return torch.stack([seconds(0), seconds(1)], dim=-1)[None, None]


def audio_latent_length(pixel_frames: int, fps: float) -> int:
    """Audio latents for a clip of `pixel_frames` at `fps`: 25 per second, rounded."""
    per_second = AUDIO_SAMPLE_RATE / AUDIO_HOP / AUDIO_DOWNSAMPLE
    return round(pixel_frames / fps * per_second)
