"""Video conditioning (sound for an existing silent video: video to audio), as the reference's `RetakePipeline`
does it with `regenerate_video=False` (ltx-pipelines 1.2.0).

The file's frames are read at its own size, frame count and frame rate (`ltx2_core.video_io.read_video`) and encoded
by the video VAE encoder. As a `Condition` of the video stream (`EncodedVideo`) it holds every video token at that
latent with denoise mask 1 − strength. Strength 1 holds the video exactly and marks the stream frozen
(`ConditionedStream.frozen`); the sampled video latent is then the encoded one exactly. The two references differ in
one input, and each release follows its own (`Release.frozen_sigma_zero`):

* 1.0.0 (2.0, 2.3), `RetakePipeline(regenerate_video=False)`: the video held by a zero denoise mask, the
  transformer fed the step's sigma for it;
* 1.2.0 (2.5), `ModalitySpec(frozen=True)`: the stream's sigma fed as 0 too, which the text and cross-modal
  modulations read, and (`RetakePipeline` keeps the frozen video at the default noise scale 1) the video noised
  before it is frozen: its tokens start as pure noise and each step moves them toward the video (the prediction is
  replaced by the clean latent), so the transformer sees noise blended toward the video while told it is clean.
  We follow it (`Release.frozen_noised`): a user comparing with Lightricks' output gets theirs. Holding the video
  clean instead (1.0.0's way) changes the sound by 10–14 % of its scale on the tiny test models; no measurement on
  the released weights says which sounds better, so it is not offered.

Lower strengths let the model change the video (not a mode of either reference).

A retake of a time span holds part of the same tokens: `EncodedVideo` with a `span` (`ltx2_core.conditioning.retake`).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import torch

from ltx2_core.conditioning.stream import VIDEO, ConditionedStream
from ltx2_core.geometry import latent_shape, patchify_video
from ltx2_core.video_io import VideoFrames, VideoInfo, VideoSource, check_video_file, read_video


class VideoCondition(NamedTuple):
    """A video file whose frames are held over the whole clip with `strength` (1: frozen, as the reference; 0: not
    at all). Its sound track, if any, is not read (a generated sound replaces it)."""

    video: VideoSource  # a file path, or frames in memory
    strength: float = 1.0

    @property
    def name(self) -> str:
        return self.video.name if isinstance(self.video, VideoFrames) else f"video {os.fspath(self.video)}"

    def check(self) -> VideoInfo:
        """The file's `VideoInfo` once it can be held as it is (`video_io.check_video_file`: size multiples of 32,
        8k+1 ≥ 9 frames, every frame decodes); ValueError naming the fix before any model work."""
        if not isinstance(self.strength, (int, float)) or isinstance(self.strength, bool) \
                or not 0 <= self.strength <= 1:
            raise ValueError(f"video strength must be in [0, 1] (1 holds the video exactly), got {self.strength!r}")
        return check_video_file(self.video)


class EncodedVideo(NamedTuple):
    """An encoded video held over the clip (a `Condition` of the video stream): latent (1, 128, F', H', W') of the
    clip's size, and its strength. Strength 1 freezes the stream (mask 0, sigma 0: the reference's frozen
    modality). `span` (start, end) seconds: the tokens meeting [start, end) are regenerated from noise (mask 1)
    and only the others held (a retake, `ltx2_core.conditioning.retake`); the stream is then not frozen."""

    latent: torch.Tensor
    strength: float
    span: tuple[float, float] | None = None
    modality = VIDEO

    def apply(self, stream: ConditionedStream) -> ConditionedStream:
        tokens = patchify_video(self.latent.to(device=stream.clean.device, dtype=stream.clean.dtype))
        if tokens.shape[1] != stream.tokens:
            raise ValueError(f"the encoded video has {tokens.shape[1]} latent tokens {tuple(self.latent.shape[2:])} "
                             f"and the clip {stream.tokens}; generate at the video's own size, frames and fps")
        # frozen, noised first where the release's reference does (`Release.frozen_noised`): 1.2.0's RetakePipeline,
        # which runs both uses of a held video (sound for a video, a retake's kept video), keeps the default scale
        return stream.hold_clip(tokens, self.strength, self.span, noised=True)


@torch.no_grad()
def encode_video_condition(condition: VideoCondition, encoder: torch.nn.Module, frames: int, height: int,
                           width: int) -> EncodedVideo:
    """The condition's first `frames` frames at height × width, encoded in one piece by the video VAE encoder (the
    reference tiles clips longer than 80 frames or wider than 768 pixels; module docstring of `video_io`)."""
    param = next(encoder.parameters())
    pixels = read_video(condition.video, height, width, frames=frames, device=param.device, dtype=param.dtype)
    latent = encoder(pixels)
    if tuple(latent.shape[2:]) != latent_shape(frames, height, width):
        raise ValueError(f"{condition.name} encodes to latent {tuple(latent.shape[2:])} and the clip needs "
                         f"{latent_shape(frames, height, width)}; give 8k+1 frames at multiples of 32 pixels")
    return EncodedVideo(latent, float(condition.strength))
