"""The settings checks of a generation that need neither a model nor a file's content: the modes
(`MODES`, `GUIDED_TWO_STAGE`), which conditions a request carries (`Given`), `check_settings` (the mode, sizes, steps,
rate and seed against those conditions) with its per-mode parts (text to audio, sound for a video or a retake,
Dub-It, HDR), `check_stage_models` (the models a mode's pipeline runs) and `check_request_sampler`. `Request.check`
runs them, and the ComfyUI nodes run them when a workflow is queued (`docs/checks_when_queued.md`)."""

from __future__ import annotations

import math
from typing import NamedTuple

from ltx2_core.errors import SettingError
from ltx2_core.geometry import VIDEO_SPACE_SCALE, is_frame_count
from ltx2_core.sampling import DISTILLED_SIGMAS
from ltx2_core.sampling.stage import SAMPLERS

MODES = ("one-stage", "two-stage", "distilled", "two-stage-hq", "keyframes", "hdr", "dfr")
# the modes whose stage 1 is guided and refined with the distilled LoRA: two-stage (Lightricks' TI2Vid two-stage
# pipeline), two-stage-hq (its TI2VidTwoStagesHQPipeline: res_2s, the LoRA in both stages) and keyframes (its
# KeyframeInterpolationPipeline: the same stages, every image appended as a keyframe)
GUIDED_TWO_STAGE = ("two-stage", "two-stage-hq", "keyframes")
REFINED = GUIDED_TWO_STAGE  # the modes whose refinement fuses the distilled LoRA
KEYFRAMES_NEED_TWO = ("keyframe interpolation (mode keyframes) interpolates between at least two images; add another "
                      "image (LTX-2 Image Condition, --image PATH:FRAME:STRENGTH), or use mode two-stage for one image")


class Given(NamedTuple):
    """Which conditions a request carries, known before their content (a ComfyUI workflow when queued: which inputs
    are linked)."""

    images: bool = False
    audio: bool = False
    controls: bool = False
    video_input: bool = False
    retake: bool = False
    dub: bool = False


def check_settings(mode: str, width: int, height: int, frames: int, fps: float, steps: int | None = None,
                   seed: int = 0, *, audio_only: bool = False, given: Given = Given(),
                   unknown: frozenset[str] = frozenset(), sampler: str | None = None) -> None:
    """SettingError naming the setting at fault and the fix, for a mode, size, frame count, step count, rate or seed
    that cannot run with the conditions `given`; needs no model and no file. `unknown`: settings not known yet (a
    linked input when a workflow is queued), whose checks are skipped."""
    known = {name: value for name, value in (("mode", mode), ("width", width), ("height", height),
                                             ("frames", frames), ("fps", fps), ("steps", steps), ("seed", seed))
             if name not in unknown}
    if "mode" in known and mode not in MODES:
        raise SettingError("mode", f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if not isinstance(audio_only, bool):
        raise SettingError("audio_only", f"audio_only must be True or False, got {audio_only!r}")
    clip = "sound for a video" if given.video_input else "a retake" if given.retake else None
    if given.dub:
        _dub_settings(known.get("mode"), given, audio_only)
    if audio_only:
        _audio_only_settings(known, given)
    elif clip is not None:
        _clip_settings(clip, known.get("mode"), given)
    if given.controls and (audio_only or clip):
        raise SettingError("controls", "control videos guide a generated video; drop them for text to audio, sound "
                                       "for a video or a retake")
    mode = known.get("mode")
    if mode == "keyframes" and not given.images:
        raise SettingError("images", KEYFRAMES_NEED_TWO)
    if mode == "dfr" and (audio_only or given.audio or given.controls or clip):
        raise SettingError("mode", "DFR generates a clip from its prompt and images only (no audio, controls, "
                                   "video_input, retake or audio_only); drop them, or use another mode")
    if mode == "hdr":
        _hdr_settings(known, audio_only, given)
    else:
        _check_sizes(known, audio_only, two_stage=mode in (*GUIDED_TWO_STAGE, "dfr")
                     or (mode == "distilled" and clip is None))
    _check_numbers(known)
    check_request_sampler(known.get("mode"), sampler)


def _hdr_settings(known: dict, audio_only: bool, given: Given) -> None:
    """HDR (`ltx2_core.hdr_pipeline`): its video is the only condition; any size of at least 64 (aligned up to 64 and
    cropped back), 8k+1 frames, the fixed distilled tables."""
    if audio_only or any(given):
        raise SettingError("mode", "HDR makes its SDR video HDR and takes no other condition (images, audio, "
                                   "controls, video_input, retake, audio_only); drop them, or use another mode")
    for name in ("width", "height", "frames"):
        value = known.get(name)
        if name in known and (isinstance(value, bool) or not isinstance(value, int)):
            raise SettingError(name, f"{name} must be an integer, got {value!r}")
    if bad := next((n for n in ("width", "height") if n in known and known[n] < 64), None):
        raise SettingError(bad, f"HDR generates at least 64x64 pixels, got {known.get('width', '?')}x"
                                f"{known.get('height', '?')}; choose width and height of at least 64")
    if "frames" in known and not is_frame_count(known["frames"]):
        raise SettingError("frames", f"frames must be 8k+1, got {known['frames']}; e.g. 121 or 161")
    if known.get("steps") is not None:
        raise SettingError("steps", "HDR runs the distilled tables (8 steps, then 2 per tile); leave steps unset")


def check_stage_models(mode: str, *, upsampler: bool, distilled_lora: bool, one_stage_input: bool = False) -> None:
    """SettingError when the mode's pipeline lacks a model it runs (given or not, known before it loads): the x2
    upsampler (two-stage, and distilled unless the clip is an input's), the distilled LoRA (two-stage)."""
    if not upsampler and (mode in GUIDED_TWO_STAGE or (mode == "distilled" and not one_stage_input)):
        raise SettingError("upsampler", f"the {mode} pipeline needs the x2 spatial latent upsampler "
                                        "(ltx-2-spatial-upscaler-x2-*.safetensors); pass it, or use mode one-stage")
    if mode == "dfr" and not (upsampler and distilled_lora):
        raise SettingError("upsampler" if not upsampler else "distilled_lora", "DFR needs the x2 spatial latent "
                           "upsampler and the distilled LoRA (every stage runs with it); pass both")
    if not distilled_lora and mode in GUIDED_TWO_STAGE:
        raise SettingError("distilled_lora", f"the {mode} pipeline needs the distilled LoRA for its refinement "
                                             "stage (ltx-2-19b-distilled-lora-*.safetensors); pass it, or use mode "
                                             "one-stage")


def check_request_sampler(mode: str | None, sampler: str | None, cache: bool = False) -> None:
    """SettingError for a sampler the mode cannot take: an unknown one, res_2s on distilled (its reference has
    none) or with step caching (two predictions per step)."""
    if sampler is None:
        return
    if sampler not in SAMPLERS:
        raise SettingError("sampler", f"sampler must be one of {', '.join(SAMPLERS)}, got {sampler!r}")
    if sampler == "res_2s" and mode == "distilled":
        raise SettingError("sampler", "the distilled pipeline steps with its own 8-step table (euler); res_2s is for "
                                      "one-stage, two-stage and two-stage-hq: set sampler to euler, or change the mode")
    if sampler == "res_2s" and cache:
        raise SettingError("cache", "step caching skips whole steps of one prediction; res_2s predicts twice per "
                                    "step: run it without the cache (or use the euler sampler with the cache)")


def _audio_only_settings(known: dict, given: Given) -> None:
    if known.get("mode", "one-stage") != "one-stage":
        raise SettingError("mode", f"text to audio (audio_only) runs one stage, got mode {known['mode']}; set mode "
                                   "to one-stage (two-stage and distilled upscale and refine a video)")
    refused = {"images": "text to audio (audio_only) has no video to hold images in; drop the images, or generate "
                         "video and audio (audio_only off)",
               "audio": "text to audio (audio_only) generates the sound, and an input sound was given too; drop the "
                        "audio to generate one, or turn audio_only off to make a video to it",
               "video_input": "text to audio (audio_only) makes a sound without video; for the sound of a video give "
                              "the video_input alone (audio_only off)",
               "retake": "text to audio (audio_only) has no video to retake; drop audio_only or the retake"}
    for name, message in refused.items():
        if getattr(given, name):
            raise SettingError(name, message)
    frames = known.get("frames", 1)
    if isinstance(frames, bool) or not isinstance(frames, int) or not is_frame_count(frames):
        raise SettingError("frames", f"frames must be 8k+1 (text to audio lasts frames / fps seconds), got "
                                     f"{frames!r}; e.g. 121 frames at 24 fps for 5 seconds")


def _clip_settings(clip: str, mode: str | None, given: Given) -> None:
    """Sound for a video and a retake: one stage at the file's size, no other condition of the video."""
    if mode in GUIDED_TWO_STAGE:
        raise SettingError("mode", f"{clip} runs one stage at the video's own size, as the reference; use mode "
                                   f"one-stage (guided) or distilled (8 steps, a distilled model), not {mode}")
    retake_only = ("a retake holds its own file's video and sound, so it takes no image, audio or video_input "
                   "condition; drop them, or the retake")
    if given.video_input and given.retake:
        raise SettingError("video_input", retake_only)
    if held := next((name for name in ("images", "audio") if getattr(given, name)), None):
        raise SettingError(held, retake_only if given.retake else "sound for a video holds the whole video, so it "
                           "takes no image or audio condition; drop the images and the audio, or the video_input")


def _dub_settings(mode: str | None, given: Given, audio_only: bool) -> None:
    """Dub-It: the distilled schedules in two stages, the clip's frames and sound its only video and audio."""
    if mode is not None and mode != "distilled":
        raise SettingError("mode", f"Dub-It runs the distilled schedules in two stages, as the reference; set mode "
                                   f"distilled (a distilled model), got {mode}")
    if audio_only:
        raise SettingError("audio_only", "Dub-It generates the clip's video and its new sound; drop audio_only")
    others = {"audio": "Dub-It's sound reference is the clip's own sound; drop the input audio",
              "controls": "Dub-It's clip is its IC-LoRA reference video; drop the other control videos",
              "video_input": "Dub-It regenerates the video from its clip; drop the video_input",
              "retake": "Dub-It re-voices the whole clip; drop the retake, or the dub"}
    if bad := next((name for name in others if getattr(given, name)), None):
        raise SettingError(bad, others[bad])


def _check_sizes(known: dict, audio_only: bool, two_stage: bool) -> None:
    if audio_only:  # the frames only: `_audio_only_settings`
        return
    sizes = {name: known[name] for name in ("frames", "width", "height") if name in known}
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise SettingError(name, f"{name} must be an integer, got {value!r}")
    fits = {"frames": is_frame_count, "width": _multiple_of(VIDEO_SPACE_SCALE),
            "height": _multiple_of(VIDEO_SPACE_SCALE)}
    if bad := next((name for name, value in sizes.items() if not fits[name](value)), None):
        raise SettingError(bad, f"frames must be 8k+1 and sizes multiples of 32, got {known.get('frames', '?')} "
                                f"frames at {known.get('width', '?')}x{known.get('height', '?')} (width x height); "
                                "e.g. 17 frames at 96x64 or 121 frames at 1280x768")
    if two_stage and (bad := next((n for n in ("width", "height") if n in sizes and sizes[n] % 64), None)):
        raise SettingError(bad, f"the {known['mode']} pipeline samples at half size first, so width and height "
                                f"must be multiples of 64, got {known.get('width', '?')}x{known.get('height', '?')}; "
                                "e.g. 1536x1024 or 768x512")


def _multiple_of(step: int):
    return lambda pixels: pixels > 0 and pixels % step == 0


def _check_numbers(known: dict) -> None:
    steps = known.get("steps")
    if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
        raise SettingError("steps", f"steps must be an integer ≥ 1, got {steps!r}")
    if known.get("mode") == "distilled" and steps not in (None, len(DISTILLED_SIGMAS) - 1):
        raise SettingError("steps", f"the distilled pipeline has a fixed 8-step schedule, got steps={steps}; leave "
                                    "steps unset (0 on the generate nodes), or use mode two-stage for a custom step "
                                    "count")
    fps = known.get("fps", 24.0)
    if isinstance(fps, bool) or not (isinstance(fps, (int, float)) and math.isfinite(fps) and fps > 0):
        raise SettingError("fps", f"fps must be a positive number, got {fps!r}")
    seed = known.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise SettingError("seed", f"seed must be an integer in [0, 2^63), got {seed!r}")
