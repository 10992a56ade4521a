"""Dub-It: re-voice a clip, as ltx-pipelines 1.2.0's `DubItPipeline` does (LTX-2.5; the Dub-It IC-LoRA).

The clip decides the generation's length and rate: its first frames floored to 8k+1 (the reference's
`snap_frames_to_grid`) at its own frame rate; the size is the caller's (two stages: multiples of 64). Its frames
guide the video as an IC-LoRA control (`ControlCondition` at the LoRA's reference_downscale_factor, the clip's
`strength`), re-encoded at each stage's size: the Dub-It IC-LoRA is fused in both stages, unlike the control
pipeline's stage 1 only. Its sound, the whole of it (the reference decodes the file's whole audio stream), is
VAE-encoded and appended to the audio stream of stage 1 as reference tokens at negative times
(`EncodedAudioReference`, strength 1). Stage 2 holds the audio frozen at stage 1's latent, whose own tokens are its
reference there; the run returns stage 2's video and stage 1's audio (`pipeline.sample_request`).

A clip may be frames in memory (`video_io.VideoFrames`, ComfyUI's IMAGE batch) with their sound as a `Waveform`
(`Dub.sound`: any rate, resampled by the encoder; the node's AUDIO input, any sound the user chooses goes through
the same maths); a file's own sound track is read from the file.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import torch

from ltx2_core.audio_io import Waveform, check_waveform, read_audio
from ltx2_core.conditioning.audio_reference import EncodedAudioReference
from ltx2_core.conditioning.control import ControlCondition
from ltx2_core.errors import SettingError
from ltx2_core.geometry import VIDEO_TIME_SCALE
from ltx2_core.video_io import VideoFrames, VideoInfo, VideoSource, video_info

MIN_FRAMES = VIDEO_TIME_SCALE + 1  # 9: one latent frame after the first


def dub_frames(frames: int) -> int:
    """The frames a clip of `frames` is dubbed over: floored to 8k+1 (the reference's `snap_frames_to_grid`)."""
    return (frames - 1) // VIDEO_TIME_SCALE * VIDEO_TIME_SCALE + 1


class Dub(NamedTuple):
    """Re-voice `clip` (a video file with sound, or `VideoFrames` with their `sound`): its frames guide the video
    through the Dub-It IC-LoRA with `strength` (1: the reference kept clean) at 1/`downscale` of each stage's size
    (the LoRA's reference_downscale_factor), its sound is the audio reference."""

    clip: VideoSource
    strength: float = 1.0
    downscale: int = 1
    sound: Waveform | None = None

    @property
    def name(self) -> str:
        return f"Dub-It clip {self.clip.name if isinstance(self.clip, VideoFrames) else os.fspath(self.clip)}"

    def info(self) -> VideoInfo:
        """The clip as it is dubbed: its size and rate, its frames floored to 8k+1, whether it has a sound."""
        info = video_info(self.clip)
        has_sound = self.sound is not None if isinstance(self.clip, VideoFrames) else info.has_sound
        return info._replace(frames=dub_frames(info.frames) if info.frames >= 1 else 0, has_sound=has_sound)

    def control(self) -> ControlCondition:
        """The clip's frames as the IC-LoRA reference video."""
        return ControlCondition(self.clip, self.strength, self.downscale)

    def check(self, sizes: tuple[tuple[int, int], ...]) -> VideoInfo:
        """`info()` once the clip can be dubbed at each stage size (height, width): ≥ 9 frames, a sound covering
        the clip, frames that decode at 1/downscale of each size; ValueError naming the fix, before any model work
        (the frames and the sound decode here)."""
        if not isinstance(self.clip, VideoFrames) and self.sound is not None:
            raise SettingError("sound", f"{self.name}: a file's own sound track is its reference; give `sound` only "
                                        "with frames in memory (VideoFrames), or drop it")
        whole = video_info(self.clip)
        if whole.frames < MIN_FRAMES:
            raise SettingError("clip", f"Dub-It needs at least {MIN_FRAMES} frames; {self.name} has {whole.frames}: "
                                       "give a longer clip")
        info = self.info()
        self.control().check(info.frames, sizes)
        self.read_sound(info)
        return info

    def read_sound(self, info: VideoInfo | None = None) -> Waveform:
        """The whole sound of the clip (a file's first audio stream; frames in memory: `sound`), checked to cover
        the clip's dubbed frames; ValueError naming the fix for none or a shorter one."""
        info = info or self.info()
        if isinstance(self.clip, VideoFrames):
            if self.sound is None:
                raise SettingError("sound", f"Dub-It re-voices the clip's own sound: {self.name} came without one; "
                                            "connect the clip's AUDIO (Get Video Components' audio)")
            sound = check_waveform(self.sound.samples, self.sound.rate, f"the sound of {self.name}")
        else:
            if not info.has_sound:
                raise SettingError("clip", f"{self.name} has no audio stream; Dub-It re-voices the clip's own sound: "
                                           "give a clip with sound (e.g. ffmpeg -i clip.mp4 -i voice.wav -map 0:v "
                                           "-map 1:a -c:v copy with_sound.mp4)")
            sound = read_audio(self.clip)
        seconds = info.frames / info.fps
        if sound.seconds + 1 / info.fps < seconds:  # an mp4's sound may end within a frame of its video
            raise SettingError("sound", f"the sound covers {sound.seconds:.3f} s of the clip's {seconds:.3f} s "
                                        f"({info.frames} frames at {info.fps:g} fps); give a sound at least as long "
                                        "as the clip, or cut the clip to the sound")
        return sound


@torch.no_grad()
def encode_dub_sound(dub: Dub, encoder: torch.nn.Module, info: VideoInfo | None = None) -> EncodedAudioReference:
    """The clip's whole sound encoded by the audio VAE encoder (resampled to the model's rate, log-mel), as the
    reference tokens of stage 1."""
    from ltx2_core.model.audio_vae import encode_audio

    sound = dub.read_sound(info)
    return EncodedAudioReference(encode_audio(sound.samples, sound.rate, encoder), 1.0)
