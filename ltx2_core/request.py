"""One generation as the pipelines take it (`Request`): the prompt, the clip, the mode, the guidance and what
conditions it (images, a sound, control videos, a video to add sound to or to retake) or how a long clip is cut into
windows, with every check that needs
no model (`Request.check`, run before any model work; `ltx2_core.pipeline.check_request` adds the model's)."""

from __future__ import annotations

import math
from dataclasses import dataclass


from ltx2_core.conditioning import (
    AudioCondition,
    ControlCondition,
    ImageCondition,
    VideoCondition,
)
from ltx2_core.conditioning.retake import Retake
from ltx2_core.geometry import check_video_size, is_frame_count, video_tokens
from ltx2_core.sampling import DISTILLED_SIGMAS, GuidanceParams
from ltx2_core.releases import DEFAULT_VERSION, RELEASES
from ltx2_core.windows import Windows

MODES = ("one-stage", "two-stage", "distilled")
DEFAULT_NEGATIVE_PROMPT = RELEASES[DEFAULT_VERSION].negative_prompt  # 2.0's and 2.3's; 2.5 adds five tags
ONE_GPU = "text to audio runs on one GPU; load the model without parallelism (no multi-GPU layout) for audio_only"


@dataclass(frozen=True)
class Request:
    """One generation. `steps` None: the release default (40 for LTX-2.0, 30 for 2.3 and 2.5; distilled stage 1 is
    8). `video_guidance` / `audio_guidance` None: the release defaults (ignored by the distilled mode, which has
    none). `negative_prompt` None: the release's.

    `audio_only`: text to audio, the sound of a clip of `frames` at `fps` (frames / fps seconds) without its video:
    one-stage only, no images; `width`, `height` and `video_guidance` are unused, and the audio guidance's modality
    scale is taken as 1 (no video to guide against, as the reference). `generate` then returns a `Generation` whose
    `frames` are None."""

    prompt: str
    negative_prompt: str | None = None
    width: int = 768
    height: int = 512
    frames: int = 121
    fps: float = 24.0
    steps: int | None = None
    seed: int = 0
    mode: str = "one-stage"
    video_guidance: GuidanceParams | None = None
    audio_guidance: GuidanceParams | None = None
    images: tuple[ImageCondition, ...] = ()  # images held at frames (image-to-video, keyframes)
    audio: AudioCondition | None = None  # a sound the video is generated to (audio-to-video), held in every stage
    audio_only: bool = False  # text to audio: the audio alone (the command line's --audio-only)
    # a video file the sound is generated for (video to audio): width, height, frames and fps must be the file's
    video_input: VideoCondition | None = None
    # control videos guiding through an IC-LoRA (depth, pose, edges), each at its LoRA's downscale; stage 1 only
    controls: tuple[ControlCondition, ...] = ()
    # regenerate a time span of a video file (and its sound): width, height, frames and fps must be the file's
    retake: Retake | None = None
    # a clip longer than one window, sampled as overlapping windows (`ltx2_core.long_video.generate_long`): `frames`
    # is then the whole clip's; None: one window of `frames`
    windows: Windows | None = None

    @property
    def seconds(self) -> float:
        """The clip's duration: frames / fps."""
        return self.frames / self.fps

    @property
    def two_stage(self) -> bool:
        """Whether an upsampled second stage follows: two-stage, and distilled without `video_input` or `retake`
        (sound for a video and a retake run the distilled table in one stage, as the reference)."""
        return self.mode == "two-stage" or (self.mode == "distilled" and not self.one_stage_input)

    @property
    def guide_tokens(self) -> int:
        """Video tokens the controls append to stage 1's (each at its size: the stage's / its downscale)."""
        return sum(video_tokens(self.frames, *control.size(*self.control_size())) for control in self.controls)

    @property
    def video_frames(self) -> int:
        """Frames of videos the video encoder takes: a held video's (sound for a video, a retake) and the controls'
        (an estimate: each clip is encoded in one piece, the controls at their smaller size counted in full)."""
        held = self.frames if self.one_stage_input else 0
        return held + self.frames * len(self.controls)

    @property
    def one_stage_input(self) -> bool:
        """Whether the clip is an input file's, sampled in one stage at its size (sound for a video, a retake)."""
        return self.video_input is not None or self.retake is not None

    def check(self) -> None:
        """ValueError naming the fix for any bad value; costs nothing, so it runs before any model work."""
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise ValueError("the prompt is empty; describe the video (and its sound) to generate")
        if not isinstance(self.audio_only, bool):
            raise ValueError(f"audio_only must be True or False, got {self.audio_only!r}")
        if self.windows is not None:  # first: what windows cannot continue is named before a file is read
            self.check_windows()
        if self.video_input is not None:  # first: the file's own faults are named before the clip's size
            self.check_video_input()
        if self.retake is not None:
            self.check_retake()
        if self.audio_only:
            self._check_audio_only()
        else:
            check_video_size(self.frames, self.height, self.width)
        if self.two_stage and (self.height % 64 or self.width % 64):
            raise ValueError(f"the {self.mode} pipeline samples at half size first, so width and height must be "
                             f"multiples of 64, got {self.width}x{self.height}; e.g. 1536x1024 or 768x512")
        if self.steps is not None and (isinstance(self.steps, bool) or not isinstance(self.steps, int)
                                       or self.steps < 1):
            raise ValueError(f"steps must be an integer ≥ 1, got {self.steps!r}")
        if self.mode == "distilled" and self.steps not in (None, len(DISTILLED_SIGMAS) - 1):
            raise ValueError(f"the distilled pipeline has a fixed 8-step schedule, got steps={self.steps}; leave "
                             "steps unset, or use mode two-stage for a custom step count")
        if not (isinstance(self.fps, (int, float)) and math.isfinite(self.fps) and self.fps > 0):
            raise ValueError(f"fps must be a positive number, got {self.fps!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise ValueError(f"seed must be an integer in [0, 2^63), got {self.seed!r}")
        for image in self.images:
            image.check(self.frames)
        self.check_controls()
        if self.audio is not None:
            if not isinstance(self.audio, AudioCondition):
                raise ValueError(f"audio must be an AudioCondition (a file or waveform, start, strength), got "
                                 f"{type(self.audio).__name__}")
            self.audio.check(self.seconds)

    @property
    def long(self) -> bool:
        """Whether the clip spans more than one window (`ltx2_core.long_video.generate_long` samples it)."""
        return self.windows is not None and self.frames > self.windows.window

    def check_windows(self) -> None:
        """A long clip: windows that can cut it, and nothing the windows cannot continue (a retake, sound for a
        video, text to audio, an input sound, control videos; images only in the first window)."""
        if not isinstance(self.windows, Windows):
            raise ValueError(f"windows must be a Windows (window, overlap, prompts), got {type(self.windows).__name__}")
        refused = {"audio_only": "a long clip is video with sound; for a long sound alone use text to audio with "
                                 "more frames, or drop audio_only",
                   "retake": "a retake regenerates a span of its own file in one window; drop the windows "
                             "(duration) or the retake",
                   "video_input": "sound for a video is sampled over the file in one window; drop the windows "
                                  "(duration) or the video_input",
                   "audio": "a long clip generates its own sound window by window; drop the input audio, or "
                            "generate one window of the sound's length",
                   "controls": "control videos guide one window; drop them, or drop the windows (duration)"}
        for name, fix in refused.items():
            if getattr(self, name):
                raise ValueError(f"windows (a long clip) with {name}: {fix}")
        if isinstance(self.frames, bool) or not isinstance(self.frames, int) or not is_frame_count(self.frames):
            raise ValueError(f"frames must be 8k+1 (the whole clip's), got {self.frames!r}; "
                             "windows.frames_for(seconds, fps) gives them for a duration")
        self.windows.check(self.frames, self.fps if isinstance(self.fps, (int, float)) and self.fps > 0 else 24.0)
        first = min(self.frames, self.windows.window)
        for image in self.images:
            if isinstance(image, ImageCondition) and isinstance(image.frame, int) and image.frame >= first:
                raise ValueError(f"an image at frame {image.frame}: a long clip holds images in its first window "
                                 f"only (frames 0..{first - 1}); move it there or drop it")

    def control_size(self) -> tuple[int, int]:
        """The (height, width) of the stage the controls guide: stage 1's (half size when two-stage), as the
        reference's IC-LoRA pipeline guides its first stage only."""
        scale = 2 if self.two_stage else 1
        return self.height // scale, self.width // scale

    def check_controls(self) -> None:
        """Each control's values and file (its frames decoded once, here) against the clip; none with text to
        audio or sound for a video."""
        if not self.controls:
            return
        if self.audio_only or self.video_input is not None or self.retake is not None:
            raise ValueError("control videos guide a generated video; drop them for text to audio, sound for a "
                             "video or a retake")
        for control in self.controls:
            if not isinstance(control, ControlCondition):
                raise ValueError(f"controls must be ControlConditions (a video file, strength, downscale), got "
                                 f"{type(control).__name__}")
            control.check(self.frames, (self.control_size(),))

    def _check_audio_only(self) -> None:
        if self.mode != "one-stage":
            raise ValueError(f"text to audio (audio_only) runs one stage, got mode {self.mode}; set mode to "
                             "one-stage (two-stage and distilled upscale and refine a video)")
        if self.images:
            raise ValueError("text to audio (audio_only) has no video to hold images in; drop the images, or "
                             "generate video and audio (audio_only off)")
        if self.audio is not None:
            raise ValueError("text to audio (audio_only) generates the sound, and an input sound was given too; "
                             "drop the audio to generate one, or turn audio_only off to make a video to it")
        if self.video_input is not None:
            raise ValueError("text to audio (audio_only) makes a sound without video; for the sound of a video give "
                             "the video_input alone (audio_only off)")
        if self.retake is not None:
            raise ValueError("text to audio (audio_only) has no video to retake; drop audio_only or the retake")
        if isinstance(self.frames, bool) or not isinstance(self.frames, int) or not is_frame_count(self.frames):
            raise ValueError(f"frames must be 8k+1 (text to audio lasts frames / fps seconds), got "
                             f"{self.frames!r}; e.g. 121 frames at 24 fps for 5 seconds")
    def check_video_input(self) -> None:
        """Sound for a video: one stage, no other condition, the clip exactly the file's (its header is read and its
        frames decoded here, once)."""
        if not isinstance(self.video_input, VideoCondition):
            raise ValueError(f"video_input must be a VideoCondition (a video file, strength), got "
                             f"{type(self.video_input).__name__}")
        if self.mode == "two-stage":
            raise ValueError("sound for a video runs one stage at the video's own size, as the reference; use mode "
                             "one-stage (guided) or distilled (8 steps, a distilled model), not two-stage")
        if self.images or self.audio is not None:
            raise ValueError("sound for a video holds the whole video, so it takes no image or audio condition; "
                             "drop the images and the audio, or the video_input")
        self._check_clip_is(self.video_input.name, self.video_input.check())

    def check_retake(self) -> None:
        """A retake: one stage, no other condition, the clip exactly the file's (its header is read and its frames
        and sound decoded here, once)."""
        if not isinstance(self.retake, Retake):
            raise ValueError(f"retake must be a Retake (a video file, start, end, what to regenerate), got "
                             f"{type(self.retake).__name__}")
        if self.mode == "two-stage":
            raise ValueError("a retake runs one stage at the video's own size, as the reference; use mode one-stage "
                             "(guided) or distilled (8 steps, a distilled model), not two-stage")
        if self.images or self.audio is not None or self.video_input is not None:
            raise ValueError("a retake holds its own file's video and sound, so it takes no image, audio or "
                             "video_input condition; drop them, or the retake")
        self._check_clip_is(self.retake.name, self.retake.check())

    def _check_clip_is(self, name: str, info) -> None:
        given = (self.width, self.height, self.frames, float(self.fps))
        if given != (info.width, info.height, info.frames, info.fps):
            raise ValueError(f"{name} is {info.width}x{info.height}, {info.frames} frames at "
                             f"{info.fps:g} fps and the request {self.width}x{self.height}, {self.frames} frames at "
                             f"{self.fps:g} fps; generate at the video's own size, frames and fps "
                             "(video_io.video_info reads them)")
