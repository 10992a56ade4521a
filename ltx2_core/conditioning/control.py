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
(1: kept clean); they attend to and are attended by every token, and are dropped after the last step. The
reference's two-stage pipeline guides stage 1 only (at half size); stage 2 refines without them.

Not yet: the reference's conditioning attention strength below 1 and its attention mask video (an attention mask
between guiding and generated tokens, which the transformer does not take in this version); both are refused by
`ControlCondition.check`.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import torch

from ltx2_core.conditioning.stream import VIDEO, ConditionedStream
from ltx2_core.geometry import VIDEO_SPACE_SCALE, latent_shape, patchify_video, video_positions
from ltx2_core.video_io import VideoFrames, VideoInfo, VideoSource, read_video, video_info


class ControlCondition(NamedTuple):
    """A control video (file path) guiding the generation through an IC-LoRA: `strength` (1: its tokens kept clean,
    0: denoised with the rest), `downscale` the IC-LoRA's reference_downscale_factor (the control is encoded at the
    stage's size / downscale), `attention_strength` and `attention_mask` as the reference's conditioning attention
    strength and mask (only 1 and None in this version)."""

    video: VideoSource  # a file path, or frames in memory (`VideoFrames`)
    strength: float = 1.0
    downscale: int = 1
    attention_strength: float = 1.0
    attention_mask: object = None

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
        is used in; ValueError naming the fix before any model work (the frames it will use decode here)."""
        if not isinstance(self.strength, (int, float)) or isinstance(self.strength, bool) \
                or not 0 <= self.strength <= 1:
            raise ValueError(f"{self.name}: strength must be in [0, 1] (1 keeps it clean), got {self.strength!r}")
        if isinstance(self.downscale, bool) or not isinstance(self.downscale, int) or self.downscale < 1:
            raise ValueError(f"{self.name}: downscale must be an integer ≥ 1 (the IC-LoRA's "
                             f"reference_downscale_factor), got {self.downscale!r}")
        if self.attention_strength != 1 or self.attention_mask is not None:
            raise ValueError(f"{self.name}: a conditioning attention strength other than 1 or an attention mask is "
                             "not supported yet (the transformer takes no attention mask in this version); use "
                             "attention strength 1 without a mask, and lower `strength` to loosen the control")
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
        return info


class EncodedControl(NamedTuple):
    """An encoded control video (a `Condition` of the video stream): latent (1, 128, F', H'/d, W'/d) of the stage's
    clip at 1/`downscale` of its size, its strength. Its tokens are appended (module docstring)."""

    latent: torch.Tensor
    strength: float
    downscale: int = 1
    modality = VIDEO

    def apply(self, stream: ConditionedStream) -> ConditionedStream:
        device = stream.clean.device
        tokens = patchify_video(self.latent.to(device=device, dtype=stream.clean.dtype))
        positions = video_positions(*self.latent.shape[2:], stream.fps, device=device)
        positions[:, 1:] *= self.downscale
        # the reference builds the mask in the latent's dtype (bf16 in real runs)
        mask = torch.full((1, tokens.shape[1], 1), 1.0 - self.strength, dtype=tokens.dtype, device=device).float()
        return stream.append(tokens, mask, positions)


@torch.no_grad()
def encode_control(condition: ControlCondition, encoder: torch.nn.Module, frames: int, height: int,
                   width: int) -> EncodedControl:
    """The control's first `frames` frames at the stage's height × width / downscale, encoded in one piece by the
    video VAE encoder."""
    param = next(encoder.parameters())
    small = condition.size(height, width)
    pixels = read_video(condition.video, *small, frames=frames, device=param.device, dtype=param.dtype)
    latent = encoder(pixels)
    if tuple(latent.shape[2:]) != latent_shape(frames, *small):
        raise ValueError(f"{condition.name} encodes to latent {tuple(latent.shape[2:])} and the stage needs "
                         f"{latent_shape(frames, *small)}; give 8k+1 frames")
    return EncodedControl(latent, float(condition.strength), condition.downscale)
