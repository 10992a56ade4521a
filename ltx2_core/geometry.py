"""Latent layouts: patchify to tokens and back, and the token positions the transformer's RoPE reads (spec §1.2, §1.8).

Video latent (B, 128, F', H/32, W/32) <-> tokens (B, F'·H'·W', 128) in f, h, w raster order.
Audio latent (B, 8, T, 16) <-> tokens (B, T, 128) with feature index c·16 + mel_bin.
The latent geometry (8 pixel frames and 32 pixels per latent cell, 25 audio latents per second) is written here only;
the VAE configs, the memory plan, the stages and the nodes import it.
"""

from __future__ import annotations

import torch

VIDEO_TIME_SCALE = 8  # pixel frames per latent frame (the first latent frame holds one)
VIDEO_SPACE_SCALE = 32  # pixels per latent row / column
AUDIO_SAMPLE_RATE = 16000
AUDIO_HOP = 160  # mel frames every 10 ms
AUDIO_DOWNSAMPLE = 4  # mel frames per audio latent -> 25 latents per second


def is_frame_count(frames: int) -> bool:
    """Whether a clip of `frames` pixel frames has a latent: 8k+1 (the first latent frame holds one)."""
    return frames >= 1 and (frames - 1) % VIDEO_TIME_SCALE == 0


def is_video_size(frames: int, height: int, width: int) -> bool:
    """Whether a clip has a latent: frames 8k+1, height and width positive multiples of 32."""
    return is_frame_count(frames) and height % VIDEO_SPACE_SCALE == 0 and width % VIDEO_SPACE_SCALE == 0 \
        and min(height, width) > 0


def check_video_size(frames: int, height: int, width: int) -> None:
    """ValueError naming the fix unless frames = 8k+1 and height, width are positive multiples of 32."""
    if not is_video_size(frames, height, width):
        raise ValueError(
            f"frames must be 8k+1 and sizes multiples of 32, got {frames} frames at {width}x{height} (width x height); "
            "e.g. 17 frames at 96x64 or 121 frames at 1280x768"
        )


def latent_shape(frames: int, height: int, width: int) -> tuple[int, int, int]:
    """(F', H', W') of the video latent of `frames` pixel frames (8k+1) at height × width pixels (multiples of 32)."""
    return (frames - 1) // VIDEO_TIME_SCALE + 1, height // VIDEO_SPACE_SCALE, width // VIDEO_SPACE_SCALE


def pixel_size(frames: int, rows: int, cols: int) -> tuple[int, int, int]:
    """(frames, height, width) in pixels of a video latent of F' = `frames`, H' = `rows`, W' = `cols`."""
    return (frames - 1) * VIDEO_TIME_SCALE + 1, rows * VIDEO_SPACE_SCALE, cols * VIDEO_SPACE_SCALE


def video_tokens(frames: int, height: int, width: int) -> int:
    """Tokens of the video latent of a clip (F'·H'·W')."""
    latent_frames, rows, cols = latent_shape(frames, height, width)
    return latent_frames * rows * cols


def floor_size(pixels: float) -> int:
    """The largest multiple of 32 pixels not above `pixels`, at least 32 (a smaller size that still has a latent)."""
    return max(VIDEO_SPACE_SCALE, int(pixels) // VIDEO_SPACE_SCALE * VIDEO_SPACE_SCALE)


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
