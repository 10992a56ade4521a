"""One generation as the pipelines take it (`Request`): the prompt, the clip, the mode, the guidance and what
conditions it (images, a sound, control videos, a video to add sound to or to retake) or how a long clip is cut into
windows, with every check that needs no model (`Request.check`, run before any model work;
`ltx2_core.request_models.check_request` adds the model's). The checks that need neither a model nor a file's content
(`check_settings`: the mode, sizes, steps, rate and seed against which conditions are given) are one function, which
the ComfyUI nodes also run when a workflow is queued (`ltx2_core.request_checks`, re-exported here)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ltx2_core.conditioning import (
    AudioCondition,
    ControlCondition,
    ImageCondition,
    VideoCondition,
)
from ltx2_core.conditioning.dub import Dub
from ltx2_core.conditioning.images import LAST_FRAME
from ltx2_core.conditioning.keyframes import appended_image_tokens
from ltx2_core.conditioning.retake import Retake
from ltx2_core.model.duration_head import clip_frames
from ltx2_core.errors import SettingError
from ltx2_core.geometry import is_frame_count, video_tokens
from ltx2_core.dfr import DFR
from ltx2_core.hdr import HDR
from ltx2_core.sampling import GuidanceParams
from ltx2_core.sampling.cache import CacheSettings
from ltx2_core.releases import DEFAULT_VERSION, RELEASES
from ltx2_core.request_checks import (
    GUIDED_TWO_STAGE,
    KEYFRAMES_NEED_TWO,
    MODES,
    Given,
    check_request_sampler,
    check_settings,
    check_stage_models,
)
from ltx2_core.windows import Windows

DEFAULT_NEGATIVE_PROMPT = RELEASES[DEFAULT_VERSION].negative_prompt  # 2.0's and 2.3's; 2.5 adds five tags
ONE_GPU = "text to audio runs on one GPU; load the model without parallelism (no multi-GPU layout) for audio_only"


@dataclass(frozen=True)
class AutoFrames:
    """The clip's length predicted, clamped to [min_seconds, max_seconds] (1.2.0's defaults: 1 s and 20 s)."""

    min_seconds: float = 1.0
    max_seconds: float = 20.0

    def check(self) -> None:
        """SettingError naming the fix for bounds that are not 0 < min ≤ max seconds."""
        bounds = (self.min_seconds, self.max_seconds)
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) for v in bounds) or \
                not 0 < self.min_seconds <= self.max_seconds:
            raise SettingError("auto_frames", f"an automatic length needs 0 < min ≤ max seconds, got "
                                              f"{self.min_seconds!r} to {self.max_seconds!r}; e.g. 1 to 20")

    def most_frames(self, fps: float) -> int:
        """The longest clip the prediction can choose at `fps` (its maximum, on the 8k + 1 grid)."""
        return clip_frames(self.max_seconds, fps, self.min_seconds, self.max_seconds)


def auto_problem(request: Request) -> str | None:
    """Why `request` cannot take an automatic length (what sets its length instead, and the fix); None when it can.
    Needs no model."""
    if request.video_input is not None or request.retake is not None:
        return ("the clip's length comes from the file (sound for a video, a retake): drop the automatic length "
                "(frames auto)")
    if request.audio is not None:
        return ("an input sound sets the clip's length (audio-to-video): give its frame count (LTX-2 Audio "
                "Condition's frames output), not auto")
    if request.controls:
        return ("control videos guide a clip of a given frame count (the reference's IC-LoRA pipeline takes one): "
                "give frames, not auto")
    if request.windows is not None:
        return "a long clip's length is its duration: give the duration, not an automatic length"
    return None


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
    # step caching in every stage (ComfyUI's EasyCache decisions, `ltx2_core.sampling.cache`); None: every step runs
    cache: CacheSettings | None = None
    # re-voice a clip (Dub-It, mode distilled): frames and fps must be the clip's (frames floored to 8k+1)
    dub: Dub | None = None
    # mode "hdr": the SDR video made HDR by the HDR IC-LoRA (`ltx2_core.hdr_pipeline`); any width and height ≥ 64
    hdr: HDR | None = None
    # the prompt rewritten by the loaded Gemma first (seeded by `seed`, seeing the first image when there are images;
    # `ltx2_core.model.text.enhance`), with the system prompt of the file `system_prompt` (None: Lightricks' from an
    # installed ltx-core)
    enhance_prompt: bool = False
    system_prompt: str | None = None
    # "euler" or "res_2s" (`ltx2_core.sampling.res2s`) in every stage; None: the mode's (res_2s for two-stage-hq)
    sampler: str | None = None
    # a length predicted by LTX-2.5's duration head (`ltx2_core.duration`): `frames` is then a placeholder until
    # `generate` resolves it, after encoding the prompt and before sampling; None: `frames` as given
    auto_frames: AutoFrames | None = None
    # mode "dfr": temporal rounds and the detailing IC-LoRA (`ltx2_core.dfr.DFR`; the chain: `ltx2_core.dfr_pipeline`)
    dfr: DFR | None = None

    @property
    def seconds(self) -> float:
        """The clip's duration: frames / fps."""
        return self.frames / self.fps

    @property
    def two_stage(self) -> bool:
        """Whether an upsampled second stage follows: two-stage, hdr, and distilled without `video_input` or `retake`
        (sound for a video and a retake run the distilled table in one stage, as the reference)."""
        return self.mode in (*GUIDED_TWO_STAGE, "hdr", "dfr") or (self.mode == "distilled" and not self.one_stage_input)

    @property
    def stage_sampler(self) -> str:
        """The sampler of every stage: the request's, else res_2s for two-stage-hq and euler for the others."""
        return self.sampler or ("res_2s" if self.mode == "two-stage-hq" else "euler")

    @property
    def guide_tokens(self) -> int:
        """Video tokens the controls append to stage 1's (each at its size: the stage's / its downscale)."""
        tokens = sum(video_tokens(self.frames, *control.size(*self.control_size())) for control in self.controls)
        if self.dub is not None:  # at stage 2's size, the larger: stage 2 holds it too
            tokens += video_tokens(self.frames, self.height // self.dub.downscale, self.width // self.dub.downscale)
        return tokens

    @property
    def reference_seconds(self) -> float:
        """Seconds of sound appended as audio reference tokens (Dub-It: the clip's sound; a file's track counted as
        long as the clip, which it covers; a longer track appends more)."""
        if self.dub is None:
            return 0.0
        sound = self.dub.sound
        return sound.seconds if sound is not None else self.seconds

    @property
    def image_tokens(self) -> int:
        """Video tokens the images append at the last stage's (full) size: every image in mode keyframes (frame 0
        too), else those at frames other than 0."""
        return appended_image_tokens(self.images, self.height, self.width, self.mode == "keyframes")

    @property
    def video_frames(self) -> int:
        """Frames of videos the video encoder takes: a held video's (sound for a video, a retake) and the controls'
        (an estimate: each clip is encoded in one piece, the controls at their smaller size counted in full)."""
        held = self.frames if self.one_stage_input or self.dub is not None else 0
        return held + self.frames * len(self.controls)

    @property
    def one_stage_input(self) -> bool:
        """Whether the clip is an input file's, sampled in one stage at its size (sound for a video, a retake)."""
        return self.video_input is not None or self.retake is not None

    @property
    def given(self) -> Given:
        """Which conditions this request carries."""
        return Given(bool(self.images), self.audio is not None, bool(self.controls), self.video_input is not None,
                     self.retake is not None, self.dub is not None)

    def check(self) -> None:
        """ValueError naming the fix for any bad value; costs nothing, so it runs before any model work."""
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise ValueError("the prompt is empty; describe the video (and its sound) to generate")
        if self.enhance_prompt:  # Lightricks' system prompt (or the named file) found before any model work
            from ltx2_core.model.text.enhance import system_prompt

            system_prompt("gemma3", bool(self.images), self.system_prompt)
        if self.windows is not None:  # first: what windows cannot continue is named before a file is read
            self.check_windows()
        # a video input's or a retake's clip is the file's: its sizes are checked against the file, after it
        clip_sizes = frozenset({"width", "height", "frames", "fps"}) if self.one_stage_input else frozenset()
        check_settings(self.mode, self.width, self.height, self.frames, self.fps, self.steps, self.seed,
                       audio_only=self.audio_only, given=self.given, unknown=clip_sizes)
        if (self.mode == "hdr") != (self.hdr is not None):
            raise SettingError("hdr", "mode hdr needs its SDR video (Request.hdr, --hdr VIDEO)" if self.hdr is None
                               else f"an HDR video was given with mode {self.mode}; set mode to hdr")
        if (self.mode == "dfr") != (self.dfr is not None):
            raise SettingError("dfr", "mode dfr needs its settings (Request.dfr = DFR(rounds, detailing LoRA))" if
                               self.dfr is None else f"DFR settings were given with mode {self.mode}; set mode to dfr")
        if self.dfr is not None and (self.cache is not None or self.windows is not None):
            raise SettingError("cache" if self.cache is not None else "windows", "DFR makes its long clip in one "
                               "canvas with its own temporal rounds; drop step caching and windows")
        if self.hdr is not None and self.cache is not None:
            raise SettingError("cache", "step caching is not available for HDR; drop it")
        check_request_sampler(self.mode, self.stage_sampler, cache=self.cache is not None)
        if self.auto_frames is not None:
            self.check_auto_frames()
        if self.video_input is not None:
            self.check_video_input()
        if self.retake is not None:
            self.check_retake()
        if self.dub is not None:
            self.check_dub()
        for image in self.images:  # an automatic length: its longest clip, the last frame placed once predicted
            if self.auto_frames is None or image.frame != LAST_FRAME:
                image.check(self.frames if self.auto_frames is None else self.auto_frames.most_frames(self.fps))
        if self.mode == "keyframes" and len(self.images) < 2:
            raise SettingError("images", KEYFRAMES_NEED_TWO)
        self.check_controls()
        if self.cache is not None and (self.audio_only or not isinstance(self.cache, CacheSettings)):
            raise SettingError("cache", "step caching decides on the video: drop it for text to audio" if
                               self.audio_only else f"cache must be a CacheSettings, got {type(self.cache).__name__}")
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
                   "controls": "control videos guide one window; drop them, or drop the windows (duration)",
                   "dub": "Dub-It re-voices its clip in one window; drop the windows (duration) or the dub"}
        for name, fix in refused.items():
            if getattr(self, name):
                raise SettingError(name, f"windows (a long clip) with {name}: {fix}")
        if self.mode == "keyframes" and self.long:
            raise SettingError("mode", "a long clip (more than one window) with mode keyframes: keyframe "
                                       "interpolation samples one window; make the clip one window long, or use mode "
                                       "two-stage")
        if isinstance(self.frames, bool) or not isinstance(self.frames, int) or not is_frame_count(self.frames):
            raise SettingError("frames", f"frames must be 8k+1 (the whole clip's), got {self.frames!r}; "
                                         "windows.frames_for(seconds, fps) gives them for a duration")
        self.windows.check(self.frames, self.fps if isinstance(self.fps, (int, float)) and self.fps > 0 else 24.0)
        first = min(self.frames, self.windows.window)
        for image in self.images:
            if isinstance(image, ImageCondition) and isinstance(image.frame, int) and image.frame >= first:
                raise SettingError("images", f"an image at frame {image.frame}: a long clip holds images in its "
                                             f"first window only (frames 0..{first - 1}); move it there or drop it")

    def check_auto_frames(self) -> None:
        """An automatic length: bounds 0 < min ≤ max seconds, and nothing that sets the clip's length otherwise."""
        if not isinstance(self.auto_frames, AutoFrames):
            raise ValueError(f"auto_frames must be an AutoFrames (min and max seconds), got "
                             f"{type(self.auto_frames).__name__}")
        self.auto_frames.check()
        if problem := auto_problem(self):
            raise SettingError("auto_frames", problem)

    def control_size(self) -> tuple[int, int]:
        """The (height, width) of the stage the controls guide: stage 1's (half size when two-stage), as the
        reference's IC-LoRA pipeline guides its first stage only."""
        scale = 2 if self.two_stage else 1
        return self.height // scale, self.width // scale

    def check_controls(self) -> None:
        """Each control's values and file (its frames decoded once, here) against the clip (none with text to audio,
        sound for a video or a retake: `check_settings`)."""
        for control in self.controls:
            if not isinstance(control, ControlCondition):
                raise ValueError(f"controls must be ControlConditions (a video file, strength, downscale), got "
                                 f"{type(control).__name__}")
            control.check(self.frames, (self.control_size(),))

    def check_video_input(self) -> None:
        """Sound for a video: the clip exactly the file's (its header is read and its frames decoded here, once; one
        stage and no other condition: `check_settings`)."""
        if not isinstance(self.video_input, VideoCondition):
            raise ValueError(f"video_input must be a VideoCondition (a video file, strength), got "
                             f"{type(self.video_input).__name__}")
        self._check_clip_is(self.video_input.name, self.video_input.check())

    def check_retake(self) -> None:
        """A retake: the clip exactly the file's (its header is read and its frames and sound decoded here, once; one
        stage and no other condition: `check_settings`)."""
        if not isinstance(self.retake, Retake):
            raise ValueError(f"retake must be a Retake (a video file, start, end, what to regenerate), got "
                             f"{type(self.retake).__name__}")
        self._check_clip_is(self.retake.name, self.retake.check())

    def check_dub(self) -> None:
        """Dub-It: its clip's frames (floored to 8k+1) and fps are the request's, its frames decode at each stage's
        size / the LoRA's downscale and its sound covers it (decoded here, once)."""
        if not isinstance(self.dub, Dub):
            raise ValueError(f"dub must be a Dub (a clip, strength, downscale, sound), got {type(self.dub).__name__}")
        info = self.dub.check(((self.height // 2, self.width // 2), (self.height, self.width)))
        if (self.frames, float(self.fps)) != (info.frames, info.fps):
            raise ValueError(f"{self.dub.name} is dubbed over {info.frames} frames at {info.fps:g} fps and the "
                             f"request has {self.frames} frames at {self.fps:g} fps; generate at the clip's frames "
                             "and fps (Dub.info() gives them)")

    def _check_clip_is(self, name: str, info) -> None:
        given = (self.width, self.height, self.frames, float(self.fps))
        if given != (info.width, info.height, info.frames, info.fps):
            raise ValueError(f"{name} is {info.width}x{info.height}, {info.frames} frames at "
                             f"{info.fps:g} fps and the request {self.width}x{self.height}, {self.frames} frames at "
                             f"{self.fps:g} fps; generate at the video's own size, frames and fps "
                             "(video_io.video_info reads them)")


# MODES, Given, check_settings and check_stage_models live in request_checks; the nodes import them from here
__all__ = ["DEFAULT_NEGATIVE_PROMPT", "GUIDED_TWO_STAGE", "MODES", "ONE_GPU", "AutoFrames", "Given", "Request",
           "auto_problem", "check_request_sampler", "check_settings", "check_stage_models"]
