"""IC-LoRA control (a depth, pose or edge video guiding the generation), as the reference's `ICLoraPipeline` builds
it (ltx-pipelines 1.0.0 `_create_conditionings`, 1.2.0 `append_ic_lora_reference_video_conditionings`; ltx-core
`VideoConditionByReferenceLatent`).

Preparing a control video: its first `frames` frames (by decoding order, whatever the file's frame rate), each
resized bilinear (no antialias) to cover the stage's size divided by the IC-LoRA's `reference_downscale_factor`
(read from the LoRA file's metadata: `loader.lora.reference_downscale_factor`) and centre-cropped, values to
[-1, 1]; the video VAE encoder (in one piece).

The control may be frames in memory instead of a file (`video_io.VideoFrames`, e.g. a ComfyUI IMAGE batch), read
exactly as a file's decoded frames (its frame rate unused: the first `frames` frames are taken).

Conditioning the sampler (`EncodedControl`, a `Condition` of the video stream): its tokens are appended after the
video's own, at the positions of their own latent grid (time [max(8f−7, 0), 8f+1) / fps as the video's), y and x
multiplied by the downscale factor so a half-size control lines up with the generation; denoise mask 1 − strength
(1: kept clean); they attend to and are attended by every token (unless weighted, below), and are dropped after
the last step. The reference's two-stage pipeline guides stage 1 only (at half size), with the IC-LoRA fused for
that stage only (`pipeline.Models.ic_loras`); stage 2 refines without either.

Attention (the reference's `ConditioningItemAttentionStrengthWrapper`): an `attention_strength` below 1, or an
`attention_mask` (a pixel-space video in [0, 1]: a file, read at the stage's size as the reference's
`_load_mask_video`, or a tensor), weights the attention between the control's tokens and the generated ones, both
ways: the mask downsampled to the control's latent grid (area per frame, then the mean of each group of pixel frames
after the first, which is kept: `latent_weights`) times the strength; the transformer adds log w to the video
self-attention scores (`ConditionedStream.append`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ltx2_core.conditioning.stream import VIDEO, ConditionedStream
from ltx2_core.geometry import VIDEO_SPACE_SCALE, latent_shape, patchify_video, video_positions
from ltx2_core.video_io import VideoFrames, VideoInfo, VideoSource, read_video, video_info


class ControlCondition(NamedTuple):
    """A control video (file path) guiding the generation through an IC-LoRA: `strength` (1: its tokens kept clean,
    0: denoised with the rest), `downscale` the IC-LoRA's reference_downscale_factor (the control is encoded at the
    stage's size / downscale), `attention_strength` in [0, 1] (the reference's conditioning attention strength: the
    weight of the attention between the control's tokens and the generated ones; 1: full) and `attention_mask`, a
    pixel-space mask of that weight over the clip: None, a video file (its first `frames` frames, the channels'
    mean, black 0 to white 1) or a float tensor (frames, H, W) or (frames, H, W, C) in [0, 1], multiplied by
    `attention_strength`."""

    video: VideoSource  # a file path, or frames in memory (`VideoFrames`)
    strength: float = 1.0
    downscale: int = 1
    attention_strength: float = 1.0
    attention_mask: str | os.PathLike | torch.Tensor | None = None

    @property
    def name(self) -> str:
        if isinstance(self.video, VideoFrames):
            return f"control {self.video.name}"
        return f"control video {Path(self.video)}"

    def size(self, height: int, width: int) -> tuple[int, int]:
        """The (height, width) the control is encoded at for a stage of height × width pixels."""
        return height // self.downscale, width // self.downscale

    def check(self, frames: int, sizes: tuple[tuple[int, int], ...]) -> VideoInfo:
        """The file's `VideoInfo` once it can guide a clip of `frames` frames at each stage size (height, width) it
        is used in; ValueError naming the fix before any model work (the frames it will use decode here, and those
        of a mask file)."""
        if not isinstance(self.strength, (int, float)) or isinstance(self.strength, bool) \
                or not 0 <= self.strength <= 1:
            raise ValueError(f"{self.name}: strength must be in [0, 1] (1 keeps it clean), got {self.strength!r}")
        if isinstance(self.downscale, bool) or not isinstance(self.downscale, int) or self.downscale < 1:
            raise ValueError(f"{self.name}: downscale must be an integer ≥ 1 (the IC-LoRA's "
                             f"reference_downscale_factor), got {self.downscale!r}")
        if not isinstance(self.attention_strength, (int, float)) or isinstance(self.attention_strength, bool) \
                or not 0 <= self.attention_strength <= 1:
            raise ValueError(f"{self.name}: attention_strength must be in [0, 1] (1: full attention between the "
                             f"control and the video, 0: none), got {self.attention_strength!r}")
        for height, width in sizes:
            small = self.size(height, width)
            if height % self.downscale or width % self.downscale or small[0] % VIDEO_SPACE_SCALE \
                    or small[1] % VIDEO_SPACE_SCALE:
                raise ValueError(f"{self.name}: the IC-LoRA encodes its control at 1/{self.downscale} of the "
                                 f"{width}x{height} stage, which must come to multiples of {VIDEO_SPACE_SCALE} "
                                 f"pixels; choose width and height multiples of {VIDEO_SPACE_SCALE * self.downscale}"
                                 " (two-stage: twice that)")
        info = video_info(self.video)
        if info.frames < frames:
            raise ValueError(f"{self.name} has {info.frames} frames and the clip {frames}; the control needs at "
                             f"least as many frames as the clip (its first {frames} are used): give a longer control "
                             f"video or generate {max(1, (info.frames - 1) // 8 * 8 + 1)} frames")
        read_video(self.video, 32, 32, frames=frames)  # every frame used decodes
        self.check_mask(frames)
        return info

    def check_mask(self, frames: int) -> None:
        """The attention mask (if any) can weight a clip of `frames` frames: a decodable file of enough frames, or a
        float tensor in [0, 1] whose frames group into the clip's latent frames; ValueError naming the fix."""
        mask = self.attention_mask
        if mask is None:
            return
        if isinstance(mask, (str, os.PathLike)):
            info = video_info(mask)  # ValueError naming the fix for a missing or damaged file
            if info.frames < frames:
                raise ValueError(f"{self.name}: its attention mask {Path(mask)} has {info.frames} frames and the "
                                 f"clip {frames}; give a mask video of at least {frames} frames (its first {frames} "
                                 "are used)")
            read_video(mask, 32, 32, frames=frames)
            return
        what = f"{self.name}: the attention mask"
        if not isinstance(mask, torch.Tensor) or not mask.is_floating_point() or mask.dim() not in (3, 4) \
                or 0 in mask.shape:
            raise ValueError(f"{what} must be a video file or a float tensor (frames, H, W) or (frames, H, W, C) "
                             f"in [0, 1], got {_described(mask)}")
        if not bool(torch.isfinite(mask).all()) or float(mask.min()) < 0 or float(mask.max()) > 1:
            raise ValueError(f"{what} must hold values in [0, 1] (0: no attention, 1: full), got values in "
                             f"[{float(mask.min()):g}, {float(mask.max()):g}]; scale it, e.g. mask / 255 for 8-bit "
                             "pixels")
        latent = latent_shape(frames, VIDEO_SPACE_SCALE, VIDEO_SPACE_SCALE)[0]
        count = min(mask.shape[0], frames)  # a longer mask: its first `frames` frames, as a file's
        if latent > 1 and (count < 2 or (count - 1) % (latent - 1)):
            raise ValueError(f"{what} has {count} frames, which do not fall into the clip's {latent} latent frames "
                             f"(the first alone, then groups of equal size); give {frames} frames, one per frame of "
                             "the clip")


def _described(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return type(value).__name__


def mask_pixels(condition: ControlCondition, frames: int, height: int, width: int) -> torch.Tensor | None:
    """The control's attention mask as (1, 1, F, H, W) fp32 in [0, 1] on the CPU, or None without one: a file's
    first `frames` frames at height × width (resized and cropped as the control video), the mean of its channels
    mapped from [-1, 1] to [0, 1] (the reference's `_load_mask_video`, which reads it in bf16; here fp32); a
    tensor's first `frames` frames (all when fewer), its channels averaged, its own size kept."""
    mask = condition.attention_mask
    if mask is None:
        return None
    if isinstance(mask, (str, os.PathLike)):
        pixels = read_video(mask, height, width, frames=frames).mean(dim=1, keepdim=True)
        return ((pixels + 1.0) / 2.0).clamp(0.0, 1.0)
    mask = mask[:frames].detach().to("cpu", torch.float32)  # a longer mask: its first `frames`, as a file's
    return (mask.mean(dim=-1) if mask.dim() == 4 else mask)[None, None]


def latent_weights(mask: torch.Tensor, latent: tuple[int, int, int]) -> torch.Tensor:
    """A pixel-space mask (1, 1, F, H, W) -> (f·h·w,) weights of the latent grid `latent` (f, h, w), in the token
    order: each frame area-averaged to h × w, then the first frame kept (the causal VAE encodes it alone) and the
    others averaged in groups of (F − 1) / (f − 1) (the reference's `downsample_mask_video_to_latent`)."""
    frames, rows, cols = latent
    spatial = F.interpolate(mask[0].transpose(0, 1), size=(rows, cols), mode="area")  # (F, 1, h, w)
    first = spatial[:1]
    if mask.shape[2] > 1 and frames > 1:
        group = (mask.shape[2] - 1) // (frames - 1)
        rest = spatial[1:].reshape(frames - 1, group, 1, rows, cols).mean(dim=1)
        first = torch.cat([first, rest])
    return first.flatten()


def control_weights(condition: ControlCondition, frames: int, height: int, width: int,
                    latent: tuple[int, int, int]) -> torch.Tensor | float | None:
    """The attention weights of a control encoded to the latent grid `latent` (f, h, w) for a stage of `frames`
    frames at height × width: (f·h·w,) fp32 from its mask times its attention strength, the strength alone (a
    number) below 1 without a mask, or None (full attention: no weights, as the reference wraps nothing)."""
    pixels = mask_pixels(condition, frames, height, width)
    if pixels is not None:
        return latent_weights(pixels, latent) * float(condition.attention_strength)
    return float(condition.attention_strength) if condition.attention_strength < 1 else None


class EncodedControl(NamedTuple):
    """An encoded control video (a `Condition` of the video stream): latent (1, 128, F', H'/d, W'/d) of the stage's
    clip at 1/`downscale` of its size, its strength, and its `attention` weights with the generated tokens (a
    number for all its tokens, one per token (F'·H'/d·W'/d,) fp32, or None: full attention and no weights). Its
    tokens are appended (module docstring)."""

    latent: torch.Tensor
    strength: float
    downscale: int = 1
    attention: torch.Tensor | float | None = None
    modality = VIDEO

    def apply(self, stream: ConditionedStream) -> ConditionedStream:
        device = stream.clean.device
        tokens = patchify_video(self.latent.to(device=device, dtype=stream.clean.dtype))
        positions = video_positions(*self.latent.shape[2:], stream.fps, device=device)
        positions[:, 1:] *= self.downscale
        # the reference builds the mask in the latent's dtype (bf16 in real runs)
        mask = torch.full((1, tokens.shape[1], 1), 1.0 - self.strength, dtype=tokens.dtype, device=device).float()
        attention = self.attention
        if isinstance(attention, (int, float)):
            attention = torch.full((tokens.shape[1],), float(attention))
        return stream.append(tokens, mask, positions, attention)


@torch.no_grad()
def encode_control(condition: ControlCondition, encoder: torch.nn.Module, frames: int, height: int,
                   width: int) -> EncodedControl:
    """The control's first `frames` frames at the stage's height × width / downscale, encoded in one piece by the
    video VAE encoder, with its attention weights (`control_weights`; a mask file read at height × width)."""
    param = next(encoder.parameters())
    small = condition.size(height, width)
    pixels = read_video(condition.video, *small, frames=frames, device=param.device, dtype=param.dtype)
    latent = encoder(pixels)
    if tuple(latent.shape[2:]) != latent_shape(frames, *small):
        raise ValueError(f"{condition.name} encodes to latent {tuple(latent.shape[2:])} and the stage needs "
                         f"{latent_shape(frames, *small)}; give 8k+1 frames")
    weights = control_weights(condition, frames, height, width, tuple(latent.shape[2:]))
    return EncodedControl(latent, float(condition.strength), condition.downscale, weights)
