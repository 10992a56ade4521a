"""Retake: regenerate the time span [start, end) of an existing clip with a new prompt and keep the rest exact, as
the reference's `RetakePipeline` (ltx-pipelines 1.0.0 for 2.0 / 2.3, 1.2.0 for 2.5).

The clip is the file's own: its size, frame count and frame rate (one stage, no upsampling). Its frames are encoded
by the video VAE encoder, and its sound, when it has one, is read over the clip ([0, frames / fps) s, 1.2.0's
`audio_latent_from_file`), encoded by the audio VAE encoder and its latent cut or zero-padded to the clip's audio
latent length. Each stream holds its encoded latent (`EncodedVideo` / `EncodedAudio` with a `span`): a token whose
time [t0, t1) meets [start, end) (t1 > start and t0 < end, the reference's `TemporalRegionMask`: a latent frame
straddling a border is regenerated whole, there is no blend) starts from pure noise with denoise mask 1; every
other token keeps its encoded value with mask 0 (per-token timestep 0, the prediction replaced by the clean value
at each step). Video latent frame f covers pixel frames [max(8f − 7, 0), 8f + 1) / fps seconds; audio latent n
covers [max(4n − 3, 0), 4n + 1) mel frames of 10 ms.

`regenerate_video=False` holds the whole video (frozen, as `VideoCondition`); `regenerate_audio=False` the whole
sound (frozen). A file without sound has its audio generated over the whole clip, as the reference does (neither
flag changes that). What is returned is what the reference returns: the sampled latents decoded (the kept parts
through a VAE round trip, not the file's own pixels or samples).

The clip may be frames in memory (`video_io.VideoFrames`, e.g. ComfyUI's IMAGE batch; read exactly as a file's
decoded frames) with its sound as a `Waveform` beside them (`Retake.sound`; None: a silent clip), read over the clip
as a file's sound is.
"""

from __future__ import annotations

import math
import os
from typing import NamedTuple

import torch
import torch.nn.functional as F

from ltx2_core.audio_io import Waveform, check_waveform, read_audio
from ltx2_core.conditioning.audio import EncodedAudio
from ltx2_core.errors import SettingError
from ltx2_core.conditioning.video import EncodedVideo, VideoCondition, encode_video_condition
from ltx2_core.geometry import audio_latent_length
from ltx2_core.video_io import VideoFrames, VideoInfo, VideoSource, check_video_file, video_info


class Retake(NamedTuple):
    """Regenerate [start, end) seconds of the video file `video` (its video and, when it has sound, its audio);
    `regenerate_video` / `regenerate_audio` False keeps that stream unchanged over the whole clip. `video` may be
    `VideoFrames` in memory, with `sound` their sound (a file's own track is read from the file)."""

    video: VideoSource
    start: float
    end: float
    regenerate_video: bool = True
    regenerate_audio: bool = True
    sound: Waveform | None = None

    @property
    def clip_name(self) -> str:
        return self.video.name if isinstance(self.video, VideoFrames) else os.fspath(self.video)

    @property
    def name(self) -> str:
        return f"retake of {self.clip_name}"

    def info(self) -> VideoInfo:
        """The clip's `VideoInfo` (a file's header; frames in memory have sound when `sound` is given)."""
        info = video_info(self.video)
        return info._replace(has_sound=self.sound is not None) if isinstance(self.video, VideoFrames) else info

    @property
    def span(self) -> tuple[float, float]:
        return float(self.start), float(self.end)

    def check(self) -> VideoInfo:
        """The file's `VideoInfo` once the retake can run: a span inside the clip with start < end, a file of
        8k+1 ≥ 9 frames at multiples of 32 pixels whose frames (and sound, if any) decode, something regenerated.
        ValueError naming the fix, before any model work (the file is decoded here)."""
        check_span(self.start, self.end, self.regenerate_video, self.regenerate_audio)
        in_memory = isinstance(self.video, VideoFrames)
        if self.sound is not None and not in_memory:
            raise ValueError(f"{self.name}: a file's own sound track is what it retakes; give `sound` only with "
                             "frames in memory (VideoFrames), or drop it")
        info = check_video_file(self.video)
        if in_memory:
            info = info._replace(has_sound=self.sound is not None)
        if self.end > info.seconds + 1e-9:
            raise ValueError(f"the retake's span ends at {self.end:g} s and {self.clip_name} lasts "
                             f"{info.seconds:.3f} s ({info.frames} frames at {info.fps:g} fps); give an end ≤ "
                             f"{info.seconds:.3f}")
        check_span(self.start, self.end, self.regenerate_video, self.regenerate_audio, info.has_sound)
        if self.sound is not None:
            if not isinstance(self.sound, Waveform):
                raise ValueError(f"{self.name}: sound must be a Waveform (samples, rate), got "
                                 f"{type(self.sound).__name__}")
            check_waveform(self.sound.samples, self.sound.rate, f"the sound of {self.name}")
        elif info.has_sound:
            read_audio(self.video, 0.0, info.seconds)  # a sound PyAV cannot decode is named now, not after sampling
        return info


def check_span(start: float, end: float, regenerate_video: bool, regenerate_audio: bool,
               has_sound: bool | None = None) -> None:
    """SettingError naming the fix unless [start, end) seconds is a non-empty span from 0 and something is
    regenerated: the video, or a sound the clip has (`has_sound` None: not known yet, that rule skipped). Needs no
    file (the span's end against the clip's length does: `Retake.check`)."""
    for flag in ("regenerate_video", "regenerate_audio"):
        value = regenerate_video if flag == "regenerate_video" else regenerate_audio
        if not isinstance(value, bool):
            raise SettingError(flag, f"{flag} must be True or False, got {value!r}")
    for what, value in (("start", start), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SettingError(what, f"the retake's {what} must be a time in seconds, got {value!r}")
    if start < 0:
        raise SettingError("start", f"the retake starts at {start:g} s, before the clip; give a start ≥ 0")
    if start >= end:
        raise SettingError("end", f"the retake's span [{start:g}, {end:g}) s is empty; give a start below the end, "
                                  "e.g. 1.0:2.5")
    if has_sound is not None and not regenerate_video and not (regenerate_audio or not has_sound):
        raise SettingError("regenerate_audio", "the retake keeps both the video and the audio, so nothing would be "
                                               "regenerated; keep at most one of them")


@torch.no_grad()
def encode_retake(retake: Retake, video_encoder: torch.nn.Module, audio_encoder: torch.nn.Module | None,
                  info: VideoInfo) -> tuple[EncodedVideo, EncodedAudio | None]:
    """The retake's conditions for a clip of `info` (the file's, `Retake.check`): the video encoded (held outside
    the span, or whole when not regenerated) and the sound encoded (the same; None for a silent file: generated)."""
    from ltx2_core.model.audio_vae import encode_audio

    span = retake.span
    video = encode_video_condition(VideoCondition(retake.video), video_encoder, info.frames, info.height, info.width)
    video = video._replace(span=span if retake.regenerate_video else None)
    if not info.has_sound:
        return video, None
    if audio_encoder is None:
        raise ValueError(f"{retake.clip_name} has sound, and the retake holds it: pass the audio VAE encoder "
                         "(Models.audio_encoder)")
    if retake.sound is None:
        sound = read_audio(retake.video, 0.0, info.seconds)
    else:  # as a file's: the samples of [0, frames / fps) s
        sound = check_waveform(retake.sound.samples, retake.sound.rate, retake.name).clip(0.0, info.seconds)
    latent = conform_length(encode_audio(sound.samples, sound.rate, audio_encoder),
                            audio_latent_length(info.frames, info.fps))
    return video, EncodedAudio(latent, 1.0, span if retake.regenerate_audio else None, retake=True)


def conform_length(latent: torch.Tensor, frames: int) -> torch.Tensor:
    """An audio latent (1, 8, T, 16) cut or zero-padded to `frames` latent frames (the reference's
    `_conform_latent_length`: a sound shorter than the clip ends in zeros)."""
    if latent.shape[2] >= frames:
        return latent[:, :, :frames]
    return F.pad(latent, (0, 0, 0, frames - latent.shape[2]))
