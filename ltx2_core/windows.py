"""The windows of a long video (a clip longer than one sampling window): how `Request.frames` is cut into
overlapping windows that continue each other, video and audio alike. Model-free: `Windows.check` runs before any
model work; `ltx2_core.long_video` samples the windows and joins them.

A window is W = 8k+1 pixel frames, L = (W − 1) / 8 + 1 latent frames; the overlap is O latent frames (8·O pixel
frames). Window n > 0 holds the previous window's last O latent frames at its latent frames 1..O (`Continuation`)
and generates its latent frame 0 (causal: one pixel frame, it cannot stand for a held 8-frame latent; dropped by
the join) and frames O+1.. (new). So window n starts S = L − 1 − O latent frames after window n − 1, its local latent
frame j is the clip's latent frame n·S + j, and it adds L − 1 − O latent frames (8·S pixel frames) to the clip; the
last window is shortened to end on the clip's last frame.

Audio (25 latents a second) follows the video's time: window n starts t_n = 8·n·S / fps seconds into the clip, its
audio at the clip's audio latent a_n = round(25·t_n) (exact when 200·S / fps is an integer, e.g. S a multiple of 3 at
24 fps; else the window's sound is placed within half an audio latent, 20 ms, of its video), of the length a clip
of its frames has. It holds the audio latents it shares with the previous window except its own latent 0 (causal
too), and the join keeps the rest.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ltx2_core.errors import SettingError
from ltx2_core.geometry import VIDEO_TIME_SCALE, audio_latent_length, is_frame_count

AUDIO_LATENTS_PER_SECOND = 25
DEFAULT_WINDOW, DEFAULT_OVERLAP = 121, 24  # 5 s windows sharing 1 s at 24 fps (each adds 4 s)


class Window(NamedTuple):
    """One window of a long clip, in the clip's latent frames and audio latents.

    frames:       its pixel frames (8k+1)
    latent_start: the clip's latent frame at its local latent frame 0
    held:         video latent frames held from the previous window (its local frames 1..held); 0 for the first
    audio_start:  the clip's audio latent at its local audio latent 0
    audio_frames: its audio latents
    audio_shared: audio latents it shares with the previous window (local [0, audio_shared); 1.. are held); 0 first
    prompt:       its prompt
    """

    index: int
    frames: int
    latent_start: int
    held: int
    audio_start: int
    audio_frames: int
    audio_shared: int
    prompt: str

    @property
    def latent_frames(self) -> int:
        return (self.frames - 1) // VIDEO_TIME_SCALE + 1

    @property
    def video_kept(self) -> int:
        """Its first local latent frame the joined clip takes (0 for the first window, held + 1 after)."""
        return 0 if self.index == 0 else self.held + 1

    @property
    def audio_kept(self) -> int:
        """Its first local audio latent the joined clip takes."""
        return self.audio_shared


class Windows(NamedTuple):
    """How a long clip is cut: `window` pixel frames per window (8k+1 ≥ 17), `overlap` pixel frames shared by
    neighbours (a multiple of 8, ≥ 8, ≤ window − 9 so each window adds a latent frame), `prompts` one per window
    (empty: the request's prompt for every window; a shorter list repeats its last)."""

    window: int = DEFAULT_WINDOW
    overlap: int = DEFAULT_OVERLAP
    prompts: tuple[str, ...] = ()

    def check(self, frames: int, fps: float) -> None:
        """SettingError naming the fix for a window, overlap or prompt list that cannot cut a clip of `frames` at
        `fps` (more prompts than windows, too: they would never be used); costs nothing (run before any model work,
        and by the long video node when a workflow is queued)."""
        window, overlap = self.window, self.overlap
        if isinstance(window, bool) or not isinstance(window, int) or not is_frame_count(window) or window < 17:
            raise SettingError("window", f"the window must be 8k+1 ≥ 17 pixel frames, got {window!r}; e.g. 121 (5 s at "
                                         "24 fps) or 241")
        multiple = "a multiple of 8 pixel frames ≥ 8 (whole latent frames)"
        if isinstance(overlap, bool) or not isinstance(overlap, int):
            raise SettingError("overlap", f"the overlap must be {multiple}, got {overlap!r}; e.g. 24 (1 s at 24 fps)")
        if overlap > window - 9:
            raise SettingError("overlap", f"the overlap ({overlap} frames) must be below the window ({window} frames) "
                                          f"by more than 8 frames, so each window adds a latent frame: at most "
                                          f"{window - 9}, {multiple}, e.g. {max(8, (window - 1) // 5 // 8 * 8)}")
        if overlap < VIDEO_TIME_SCALE or overlap % VIDEO_TIME_SCALE:
            nearest = max(VIDEO_TIME_SCALE, round(overlap / VIDEO_TIME_SCALE) * VIDEO_TIME_SCALE)
            raise SettingError("overlap", f"the overlap must be {multiple}, got {overlap}; e.g. {nearest}")
        self._check_prompts(frames)
        if self.count(frames) > 1:
            shared = min(window.audio_shared for window in self.plan(frames, fps, "")[1:])
            if shared < 2:
                raise SettingError("overlap", f"an overlap of {overlap} frames at {fps:g} fps shares {shared} audio "
                                              "latent(s) between windows, too few to hold the sound's continuation; "
                                              "give a longer overlap")

    def _check_prompts(self, frames: int) -> None:
        if not isinstance(self.prompts, tuple) or any(not isinstance(p, str) or not p.strip() for p in self.prompts):
            raise SettingError("prompts", "the window prompts must be a tuple of non-empty texts (one per window, the "
                                          "last repeated); drop an empty one")
        count = self.count(frames)
        if len(self.prompts) > count:
            raise SettingError("prompts", f"{len(self.prompts)} window prompts for {count} window(s) of this clip: "
                                          f"the last {len(self.prompts) - count} would never be used; give at most "
                                          f"{count}, or lengthen the clip (or shorten the window)")

    @property
    def stride(self) -> int:
        """Latent frames each window after the first adds: L − 1 − O."""
        return (self.window - 1 - self.overlap) // VIDEO_TIME_SCALE

    def count(self, frames: int) -> int:
        """Windows for a clip of `frames` (8k+1): 1 when it fits one window."""
        latents, per_window = (frames - 1) // VIDEO_TIME_SCALE + 1, (self.window - 1) // VIDEO_TIME_SCALE + 1
        return 1 if latents <= per_window else 1 + math.ceil((latents - per_window) / self.stride)

    def prompt(self, index: int, default: str) -> str:
        """The prompt of window `index`: its entry of `prompts` (the last repeated), else `default`."""
        return self.prompts[min(index, len(self.prompts) - 1)] if self.prompts else default

    def plan(self, frames: int, fps: float, prompt: str) -> tuple[Window, ...]:
        """The windows of a clip of `frames` (8k+1) at `fps` (see the module docstring); one window of `frames` when
        it fits one."""
        latents, per_window, held = (frames - 1) // VIDEO_TIME_SCALE + 1, (self.window - 1) // VIDEO_TIME_SCALE + 1, \
            self.overlap // VIDEO_TIME_SCALE
        windows: list[Window] = []
        for index in range(self.count(frames)):
            start = index * self.stride
            count = min(per_window, latents - start)
            pixels = (count - 1) * VIDEO_TIME_SCALE + 1
            audio_start = round(start * VIDEO_TIME_SCALE / fps * AUDIO_LATENTS_PER_SECOND)
            shared = 0 if not windows else windows[-1].audio_start + windows[-1].audio_frames - audio_start
            windows.append(Window(index, pixels, start, held if index else 0, audio_start,
                                  audio_latent_length(pixels, fps), shared, self.prompt(index, prompt)))
        return tuple(windows)


def frames_for(seconds: float, fps: float) -> int:
    """The fewest pixel frames (8k+1) lasting at least `seconds` at `fps`; SettingError naming the fix for a bad
    duration."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
            or seconds <= 0:
        raise SettingError("duration", f"the duration must be a positive number of seconds, got {seconds!r}; e.g. 30")
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not math.isfinite(fps) or fps <= 0:
        raise SettingError("fps", f"fps must be a positive number, got {fps!r}")
    needed = max(1, math.ceil(seconds * fps - 1e-6))
    return 1 + math.ceil((needed - 1) / VIDEO_TIME_SCALE) * VIDEO_TIME_SCALE
