"""ComfyUI's native LTX-2 LATENT and our latent, both ways (torch only; ComfyUI's NestedTensor comes through bridge).

ComfyUI keeps the joint latent as `{"samples": NestedTensor((video, audio)), "noise_mask": ...}`: video
(B, 128, F', H', W'), audio (B, 8, T, 16), both normalised by the VAEs' per-channel statistics, which is exactly our
`AVLatent` (its latent format's scale is 1, so what a KSampler sees is what the dict stores). An audio-only latent is
`{"samples": audio, "type": "audio"}`, a video-only one `{"samples": video}`. Our nodes give such a dict (`Latent`)
with two extra keys native nodes ignore and copy along: the clip's frame rate and the sound the audio latent holds
exactly (kept only while the audio tensor is that very tensor). docs/interop/latents.md.
"""

from __future__ import annotations

import math

import torch

from ltx2_core.audio_io import Waveform
from ltx2_core.conditioning.images import EncodedImage
from ltx2_core.geometry import AUDIO_DOWNSAMPLE, AUDIO_HOP, AUDIO_SAMPLE_RATE, pixel_size
from ltx2_core.stages import AUDIO_CHANNELS, MEL_BINS, AVLatent

from . import bridge

FPS_KEY = "ltx2_fps"  # the clip's frame rate (native latents carry none; ComfyUI's is in LTXVConditioning)
SOUND_KEY = "ltx2_sound"  # (Waveform, the audio tensor whose encoding it is)
# whether the latent's audio was sampled by a guided stage (a refinement of it keeps that audio where the release's
# two-stage pipeline does: `ltx2_core.sampling.recipe`); absent: not known to be (a native latent, an empty one)
GUIDED_KEY = "ltx2_guided"
VIDEO_CHANNELS = 128
AUDIO_PER_SECOND = AUDIO_SAMPLE_RATE / AUDIO_HOP / AUDIO_DOWNSAMPLE  # 25 audio latents a second, as ComfyUI's
COMMON_RATES = (24.0, 25.0, 30.0, 23.976, 29.97, 48.0, 50.0, 60.0, 59.94, 12.0, 15.0, 16.0, 20.0)
NATIVE_AV = ("ComfyUI's LTXVEmptyLatentAudio (its frame_rate is the clip's) joined to the video latent with "
             "LTXVConcatAVLatent, or use LTX-2 Empty Latent")


class Latent(dict):
    """ComfyUI's LATENT as our nodes give it (a plain dict to native nodes), read back as our `AVLatent`."""

    @property
    def av(self) -> AVLatent:
        return from_comfy(self)

    @property
    def video(self) -> torch.Tensor | None:
        return self.av.video

    @property
    def audio(self) -> torch.Tensor:
        return self.av.audio

    @property
    def fps(self) -> float:
        return self.av.fps

    @property
    def sound(self) -> Waveform | None:
        return self.av.sound

    @property
    def pixel_size(self) -> tuple[int, int, int]:
        return self.av.pixel_size


def to_comfy(latent: AVLatent, like: dict | None = None) -> Latent:
    """`latent` as ComfyUI's LATENT: the same tensors (no copy), nested as LTXVConcatAVLatent nests them (audio-only:
    `type` "audio", as LTXVEmptyLatentAudio). `like`: the input latent whose other keys (native nodes' own, e.g.
    `downscale_ratio_spacial`) are kept; its noise mask is dropped (our sampler has used it)."""
    kept = {k: v for k, v in (like or {}).items() if k not in ("samples", "noise_mask", "type", SOUND_KEY)}
    if latent.video is None:
        out = Latent(kept, samples=latent.audio, type="audio")
    elif latent.audio.shape[2] == 0:  # a video-only latent (`from_comfy(video_only=True)`) stays one
        out = Latent(kept, samples=latent.video)
    else:
        out = Latent(kept, samples=bridge.nested_tensor((latent.video, latent.audio)))
    if latent.fps > 0:
        out[FPS_KEY] = float(latent.fps)
    if latent.sound is not None:
        out[SOUND_KEY] = (latent.sound, latent.audio)
    return out


def guided_audio(latent: object) -> bool:
    """Whether a LATENT's audio was sampled by a guided stage (its `ltx2_guided` key, which our samplers set)."""
    return isinstance(latent, dict) and latent.get(GUIDED_KEY) is True


def mark_guided(latent: Latent, guided: bool) -> Latent:
    """`latent` marked with whether its audio was sampled by a guided stage (`guided_audio`)."""
    latent[GUIDED_KEY] = bool(guided)
    return latent


def is_nested(samples: object) -> bool:
    """Whether `samples` is a ComfyUI NestedTensor (duck-typed: its `tensors` list; a torch tensor never is)."""
    return not isinstance(samples, torch.Tensor) and isinstance(getattr(samples, "tensors", None), (list, tuple))


def split(latent: object) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(video, audio) of ComfyUI's LATENT dict, either None where absent; ValueError naming the fix for anything
    else (a wrong shape, an image latent)."""
    if not isinstance(latent, dict) or "samples" not in latent:
        raise ValueError(f"latent: expected ComfyUI's LATENT (a dict with 'samples'), got {type(latent).__name__}")
    samples = latent["samples"]
    if is_nested(samples):
        parts = list(samples.tensors)
        if len(parts) != 2:
            raise ValueError(f"latent: an LTX-2 audio + video latent nests 2 tensors (video, audio), this one "
                             f"{len(parts)}; join them with LTXVConcatAVLatent")
        video, audio = parts
    elif isinstance(samples, torch.Tensor) and samples.ndim == 4 and (
            latent.get("type") == "audio" or tuple(samples.shape[1::2]) == (AUDIO_CHANNELS, MEL_BINS)):
        video, audio = None, samples  # LTXVSeparateAVLatent's and Load Latent's audio carry no "type"
    elif isinstance(samples, torch.Tensor) and samples.ndim == 5:
        video, audio = samples, None
    else:
        shape = tuple(getattr(samples, "shape", ()))
        raise ValueError(f"latent: {shape} is not an LTX-2 latent (video (B, 128, F', H/32, W/32), audio "
                         "(B, 8, T, 16)); make it with EmptyLTXVLatentVideo / LTXVEmptyLatentAudio or LTX-2 Empty "
                         "Latent")
    if video is not None and (video.ndim != 5 or video.shape[1] != VIDEO_CHANNELS):
        raise ValueError(f"latent: the video latent is {tuple(video.shape)}, LTX-2's is (B, 128, F', H/32, W/32); "
                         "make it with EmptyLTXVLatentVideo or LTX-2 Empty Latent")
    if audio is not None and (audio.ndim != 4 or tuple(audio.shape[1::2]) != (AUDIO_CHANNELS, MEL_BINS)):
        raise ValueError(f"latent: the audio latent is {tuple(audio.shape)}, LTX-2's is (B, 8, T, 16); make it "
                         "with LTXVEmptyLatentAudio")
    if video is not None and audio is not None and video.shape[0] != audio.shape[0]:
        raise ValueError(f"latent: the video latent's batch is {video.shape[0]}, the audio's {audio.shape[0]}; "
                         "give both the same batch_size")
    return video, audio


MASK_REFUSED = ("latent: its noise mask {what}, which our samplers cannot hold; hold images with LTX-2 Image "
                "Condition (LTX-2 Sampler's images input) instead, or sample it with ComfyUI's own sampler")


def mask_conditions(latent: dict) -> list[EncodedImage]:
    """What a native noise mask asks, as our conditions: none for no mask or an all-ones one; for the mask
    LTXVImgToVideo / LTXVImgToVideoInplace make (the first t latent frames at 1 − strength, the rest 1, the audio's
    all 1), the latent's own first t frames held at that strength, as LTX-2 Image Condition holds an image at frame
    0 (ltx-core's conditioning: the tokens' timesteps scaled by the mask, their clean values restored). Any other
    mask (a spatial one, frames past the start, on the audio) is refused naming what works."""
    mask = latent.get("noise_mask")
    if mask is None:
        return []
    parts = list(mask.tensors) if is_nested(mask) else [mask]
    video, _ = split(latent)
    if len(parts) > 1 and not bool((parts[1] == 1).all()):
        raise ValueError(MASK_REFUSED.format(what="covers the audio (hold a sound with LTX-2 Audio Condition)"))
    video_mask = parts[0]
    if video_mask is None or bool((video_mask == 1).all()):
        return []
    if video is None or video_mask.ndim != 5 or video_mask.shape[2] != video.shape[2]:
        raise ValueError(MASK_REFUSED.format(what=f"{tuple(video_mask.shape)} does not fit the video latent"))
    frames = video_mask.float().flatten(3).transpose(1, 2).flatten(2)  # (B, F', values of a frame)
    values = frames[..., 0]
    held = int((values[0] < 1).sum())
    if (not bool((frames == values.unsqueeze(-1)).all()) or not bool((values == values[:1]).all())
            or not bool((values[0, :held] == values[0, 0]).all()) or not bool((values[0, held:] == 1).all())
            or held == 0 or not 0 <= float(values[0, 0]) < 1):
        raise ValueError(MASK_REFUSED.format(what="is not LTXVImgToVideo's (the first frames at one strength, the "
                                                  "rest 1, the same over each frame)"))
    return [EncodedImage(video[:1, :, :held], 0, 1.0 - float(values[0, 0]))]


def clip_fps(frames: int, audio_latents: int) -> float:
    """The frame rate of a native latent, which carries none, from its audio length: the first common rate whose
    clip gives that many audio latents (ComfyUI rounds up, we round), else the rate that makes both last as long."""
    seconds = [frames / rate * AUDIO_PER_SECOND for rate in COMMON_RATES]
    for rate, latents in zip(COMMON_RATES, seconds):
        if audio_latents in (math.ceil(latents), round(latents)):
            return rate
    return frames * AUDIO_PER_SECOND / audio_latents


def from_comfy(latent: object, *, video_only: bool = False) -> AVLatent:
    """Our `AVLatent` of ComfyUI's LATENT (ours or a native node's): the same tensors, no copy. `video_only`: a
    video latent without audio is taken (its audio an empty (B, 8, 0, 16)); otherwise it is refused, naming the
    nodes that add the audio. The frame rate is the dict's `ltx2_fps`, else `clip_fps`; the held sound is kept only
    while its audio tensor is the dict's."""
    if isinstance(latent, AVLatent):
        return latent
    video, audio = split(latent)
    if audio is None:
        if not video_only:
            raise ValueError(f"latent: a video-only latent; LTX-2 samples video and audio together: add {NATIVE_AV}")
        audio = video.new_zeros(video.shape[0], AUDIO_CHANNELS, 0, MEL_BINS)
    fps = latent.get(FPS_KEY)
    if fps is None:
        if video is None or audio.shape[2] == 0:
            fps = 24.0 if video is None else 0.0  # audio alone: its length is its duration; video alone: unknown
        else:
            fps = clip_fps(pixel_size(*video.shape[2:])[0], audio.shape[2])
    held = latent.get(SOUND_KEY)
    sound = held[0] if isinstance(held, tuple) and len(held) == 2 and held[1] is audio else None
    return AVLatent(video, audio, float(fps), sound)
