"""The command line's value parsers (argparse `type=`s): STG blocks, counts, LoRA strengths, and the
PATH[:SETTING...] forms of --image, --audio, --control and --retake, read from the right so a path may hold colons."""

from __future__ import annotations

import argparse
import math
import os
import re

from ltx2_core.conditioning.audio import AudioCondition
from ltx2_core.conditioning.control import ControlCondition
from ltx2_core.conditioning.images import MAX_CRF, ImageCondition


def stg_blocks(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(b) for b in text.split(",") if b.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"blocks must be comma-separated integers, e.g. 28,29; got {text!r}")


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be an integer ≥ 1, got {text!r}")
    return int(text)


def frames(text: str) -> int | str:
    """A frame count, or "auto": the length LTX-2.5's duration head predicts from the prompt."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a frame count (8k+1, e.g. 121) or auto, got {text!r}") from None


def fraction(text: str) -> float:
    """A number in [0, 1] (a fraction of the sampling)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {text!r}")
    return value


def non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a number ≥ 0, got {text!r}")
    return value


_LORA_FIELDS = (("STRENGTH", float, "a number (1: as trained, 0: off)"),)


def lora(text: str) -> tuple[str, float]:
    """PATH[:STRENGTH] (see `path_and_settings`): the strength defaults to 1."""
    path, numbers = path_and_settings(text, _LORA_FIELDS, "PATH[:STRENGTH]", "style.safetensors:0.8")
    if numbers and not math.isfinite(numbers[0]):
        raise argparse.ArgumentTypeError(f"{text}: STRENGTH must be a finite number, got {numbers[0]}")
    return path, numbers[0] if numbers else 1.0


_IMAGE_FIELDS = (("FRAME", int, "an integer (-1: the last frame)"), ("STRENGTH", float, "a number in [0, 1]"),
                 ("CRF", int, f"an integer in 0..{MAX_CRF} (0: no H.264 round trip)"))
_NUMBER_LIKE = re.compile(r"[-+]?[0-9.]+(e[-+]?[0-9]+)?", re.IGNORECASE)


_AUDIO_FIELDS = (("START", float, "a time in seconds"), ("STRENGTH", float, "a number in [0, 1]"))


def image(value: str) -> ImageCondition:
    """PATH[:FRAME[:STRENGTH[:CRF]]] (see `path_and_settings`)."""
    path, numbers = path_and_settings(value, _IMAGE_FIELDS, "PATH[:FRAME[:STRENGTH[:CRF]]]", "cat.png:-1:1.0:33")
    return ImageCondition(path, *numbers)


def audio(value: str) -> AudioCondition:
    """PATH[:START[:STRENGTH]] (see `path_and_settings`)."""
    path, numbers = path_and_settings(value, _AUDIO_FIELDS, "PATH[:START[:STRENGTH]]", "voice.wav:1.5:1.0")
    return AudioCondition(path, *numbers)


_CONTROL_FIELDS = (("STRENGTH", float, "a number in [0, 1]"),
                   ("ATTENTION", float, "a number in [0, 1] (the attention strength)"), ("MASK", str, "a video file"))
CONTROL_FORM = "PATH[:STRENGTH[:ATTENTION[:MASK]]]"


def control(value: str) -> ControlCondition:
    """PATH[:STRENGTH[:ATTENTION[:MASK]]] (see `path_and_settings`): the control video, its strength, its attention
    strength and an attention mask video; the downscale factor is read from the LoRAs in `build_request`."""
    path, settings = path_and_settings(value, _CONTROL_FIELDS, CONTROL_FORM, "depth.mp4:1.0:0.5:mask.mp4")
    return ControlCondition(path, **dict(zip(("strength", "attention_strength", "attention_mask"), settings)))


def span(value: str) -> tuple[str, float, float]:
    """PATH:START:END (see `path_and_settings`): both times required."""
    path, numbers = path_and_settings(value, _SPAN_FIELDS, "PATH:START:END", "clip.mp4:1.0:2.5")
    if len(numbers) != 2:
        raise argparse.ArgumentTypeError(f"{value}: --retake needs the span's START and END seconds after the path, "
                                         "e.g. clip.mp4:1.0:2.5")
    return path, *numbers


_SPAN_FIELDS = (("START", float, "a time in seconds"), ("END", float, "a time in seconds"))


def path_and_settings(value: str, fields: tuple, form: str, example: str) -> tuple[str, list]:
    """A path and its settings, read from the right: the settings follow the longest prefix naming a file (a path
    may hold colons); with no such file, the trailing number-like fields are the settings (and, where the last field
    is a file, all of them after number-like ones)."""
    parts = value.split(":")
    cut = next((cut for cut in range(len(parts), 0, -1) if os.path.isfile(":".join(parts[:cut]))), None)
    if cut is None and fields[-1][1] is str and len(parts) > len(fields) and \
            all(_NUMBER_LIKE.fullmatch(part) for part in parts[-len(fields):-1]):
        cut = len(parts) - len(fields)  # every setting given, the last a file: it needs no number look
    if cut is None:
        cut = len(parts)
        while cut > 1 and len(parts) - cut < len(fields) and _NUMBER_LIKE.fullmatch(parts[cut - 1]):
            cut -= 1
    path, settings = ":".join(parts[:cut]), parts[cut:]
    if len(settings) > len(fields):
        raise argparse.ArgumentTypeError(f"{value}: {len(settings)} settings after {path}; the form is {form}, "
                                         f"e.g. {example}")
    numbers = []  # the settings, converted (a file field stays text)
    for text, (field, kind, what) in zip(settings, fields):
        try:
            numbers.append(kind(text))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value}: {field} must be {what}, got {text!r} ({form})") from None
    return path, numbers
