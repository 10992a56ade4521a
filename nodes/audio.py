"""Audio conditioning: a sound the video is generated to (lip-sync to a voice, a music video from a song)."""

from __future__ import annotations

import math

import torch

from ltx2_core.audio_io import Waveform, check_waveform
from ltx2_core.conditioning.audio import AudioCondition
from ltx2_core.geometry import is_frame_count

from .handles import AUDIO_CONDITION
from .sampling import MAX_FRAMES
from .validation import limits_problem


class LTX2AudioCondition:
    DESCRIPTION = ("A sound to generate the video to (lip-sync to a voice, a music video from a song): any rate, "
                   "mono or stereo. Wire `audio` into the sampler (every sampler of a two-stage chain) or the "
                   "generate node, and `frames` into the latent's frames to make the clip as long as the sound.")
    CATEGORY = "LTX-2/conditioning"
    RETURN_TYPES = (AUDIO_CONDITION, "INT")
    RETURN_NAMES = ("audio", "frames")
    OUTPUT_TOOLTIPS = ("the sound cut to [start, start + duration), held by the sampler over the clip",
                       f"the most frames (8k+1, at most {MAX_FRAMES}) the cut sound covers at `fps`")
    FUNCTION = "cut"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "audio": ("AUDIO", {"tooltip": "the sound (Load Audio, or any audio node; the first of a batch), mono or "
                                "stereo at any sample rate"}),
            "start": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 86400.0, "step": 0.01,
                                "tooltip": "seconds into the sound where the clip starts"}),
            "duration": ("FLOAT", {"default": 0.0, "min": 0.0, "max": 86400.0, "step": 0.01,
                                   "tooltip": "seconds of sound to use from start; 0: to its end"}),
            "strength": ("FLOAT", {"default": 1.0, "min": 0.0, "max": 1.0, "step": 0.01,
                                   "tooltip": "1 holds the sound exactly (the video is generated to it and the "
                                              "output carries it unchanged, as the reference); lower lets the model "
                                              "change the sound"}),
            "fps": ("FLOAT", {"default": 24.0, "min": 1.0, "max": 120.0, "step": 0.01,
                              "tooltip": "the video's frame rate, for the frames output (set the latent's fps to "
                                         "the same)"}),
        }}

    @classmethod
    def VALIDATE_INPUTS(cls, start: float | None = None, duration: float | None = None, strength: float | None = None,
                        fps: float | None = None):
        """The numbers' limits, NaN too (ComfyUI's own range check lets NaN pass)."""
        return limits_problem(cls, dict(start=start, duration=duration, strength=strength, fps=fps)) or True

    def cut(self, audio: dict, start: float = 0.0, duration: float = 0.0, strength: float = 1.0,
            fps: float = 24.0):
        sound = cut_sound(comfy_sound(audio), start, duration)
        condition = AudioCondition(sound, 0.0, float(strength))
        condition.check(sound.seconds)  # the strength, and samples above full scale, now
        return condition, frames_covered(sound, fps)


def comfy_sound(audio: dict) -> Waveform:
    """ComfyUI AUDIO {"waveform": (B, C, S) float, "sample_rate": Hz} -> the first item of the batch as a Waveform
    (C, S) float32 on the CPU; ValueError naming the fix for anything the audio encoder would refuse."""
    waveform = audio.get("waveform") if isinstance(audio, dict) else None
    if not isinstance(waveform, torch.Tensor) or waveform.dim() != 3:
        shape = tuple(waveform.shape) if isinstance(waveform, torch.Tensor) else type(waveform).__name__
        raise ValueError(f"audio must be a ComfyUI AUDIO with a waveform (batch, channels, samples), got {shape}; "
                         "connect Load Audio or another audio node")
    if waveform.shape[0] == 0:
        raise ValueError("audio is an empty batch; give it at least one sound")
    return check_waveform(waveform[0], audio.get("sample_rate"), "audio")  # ltx2_core's checks: C, S, dtype, NaN


def cut_sound(sound: Waveform, start: float, duration: float) -> Waveform:
    """Samples [start, start + duration) of `sound` (duration 0, or past the end: to its end)."""
    if not math.isfinite(start) or start < 0 or not math.isfinite(duration) or duration < 0:
        raise ValueError(f"start and duration must be seconds ≥ 0, got start {start!r} and duration {duration!r}")
    first = round(start * sound.rate)
    if first >= sound.samples.shape[-1]:
        raise ValueError(f"start {start:g} s is past the end of the sound (it lasts {sound.seconds:.3f} s); pick an "
                         "earlier start")
    last = first + round(duration * sound.rate) if duration else None
    return sound._replace(samples=sound.samples[:, first:last])


def frames_covered(sound: Waveform, fps: float) -> int:
    """The most pixel frames (8k+1, at most MAX_FRAMES) whose clip (frames / fps seconds) the sound covers."""
    if not math.isfinite(fps) or fps <= 0:
        raise ValueError(f"fps must be a positive number, got {fps!r}")
    samples = sound.samples.shape[-1]
    frames = min(int((samples + 0.5) / sound.rate * fps) + 1, MAX_FRAMES)  # a clip needs round(frames / fps · rate)
    while frames >= 1 and (not is_frame_count(frames) or round(frames / fps * sound.rate) > samples):
        frames -= 1
    if frames < 1:
        raise ValueError(f"the sound lasts {sound.seconds:.3f} s, less than one frame at {fps:g} fps; use a longer "
                         "sound, an earlier start or a longer duration")
    return frames

