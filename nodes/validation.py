"""Queue-time checks shared by the nodes: the limits INPUT_TYPES states, the links, the settings ltx2_core checks
without a model or a file, and model files picked in a folder.

ComfyUI (0.26, execution.validate_inputs) converts each widget value to its type (INT, FLOAT, STRING, BOOLEAN) and
then checks min, max and the choices of every input a node's VALIDATE_INPUTS does not name; a FLOAT of NaN passes
those checks, and a null choice reaches the node as None, as a linked input does. A VALIDATE_INPUTS failure is listed
on every input the validator names. So a node names only the inputs its own rules need: one whose value ComfyUI
cannot judge (a file's kind, frames of 8k+1, a sigma list), a FLOAT (to refuse NaN), the inputs a rule relates (a
retake's start and end; the mode and the sizes); `stated_limits` enforces on them the limits INPUT_TYPES states, and
every message begins with the input at fault. A validator that also takes `input_types` learns which inputs are
linked (a null choice is then told from a link, a linked retake changes the rules), and ComfyUI then skips its
check of the links' types, which `link_problem` makes instead, by ComfyUI's own rule (`bridge.link_fits`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping

from ltx2_core.errors import LTX2Error, SettingError
from ltx2_core.loader.identify import check_kind

from . import bridge

# kind -> (models folder, the node that loads it, its input, what to pick)
FILE_KINDS = {
    "checkpoint": ("checkpoints", "LTX-2 Checkpoint Loader", "ckpt_name",
                   "an LTX-2 checkpoint such as ltx-2-19b-dev.safetensors or ltx-2.3-22b-dev.safetensors"),
    "transformer": ("diffusion_models", "LTX-2 Model Loader (separate files)", "transformer",
                    ("an LTX-2.5 transformer such as ltx-2.5-22b-dev-transformer-bf16.safetensors, or an LTX-2 / "
                     "2.3 / 2.5 transformer GGUF")),
    "video VAE": ("vae", "LTX-2 Model Loader (separate files)", "video_vae",
                  "ltx-2.5-video-vae-bf16.safetensors (diffusion decoder) or ltx-2.5-video-vae-conv-bf16.safetensors"),
    "audio VAE": ("vae", "LTX-2 Model Loader (separate files)", "audio_vae", "ltx-2.5-audio-vae-bf16.safetensors"),
    "text encoder": ("text_encoders", "LTX-2 Text Encoder Loader (Gemma)", "text_encoder",
                     "Gemma 3 12B for LTX-2.0/2.3 (gemma_3_12B_it*.safetensors or a google/gemma-3-12b-it folder), "
                     "gemma4-12b-with-proj-ltx-2.5-bf16.safetensors for LTX-2.5"),
    "latent upsampler": ("latent_upscale_models", "LTX-2 Latent Upsampler Loader", "upscale_model_name",
                         "ltx-2-spatial-upscaler-x2-*.safetensors or ltx-2.3-spatial-upscaler-x2-*.safetensors"),
    "LoRA": ("loras", "LTX-2 LoRA Loader", "lora_name", "a LoRA trained for LTX-2"),
    "text projection": ("text_encoders", "LTX-2 Model Loader (separate files)", "text_projection",
                        ("the text projection and connectors of a GGUF transformer: ComfyUI's "
                         "ltx-2*-embeddings_connector*.safetensors")),
}
MAX_TEXT = 100_000  # characters of a text input the pack checks itself


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def input_spec(node: type, name: str) -> tuple[object, dict]:
    """(type or list of choices, options) of input `name` as the node's INPUT_TYPES states it."""
    types = node.INPUT_TYPES()
    for section in ("required", "optional"):
        if name in types.get(section, {}):
            entry = types[section][name]
            return entry[0], entry[1] if len(entry) > 1 else {}
    raise KeyError(f"{node.__name__} has no input {name!r}")


def stated_limits(node: type, name: str, value: object, links: Mapping[str, object] | None = None) -> str | None:
    """Why `value` breaks what INPUT_TYPES states for input `name` (type, min, max, choices, a finite number); None
    when it keeps to it. None is a linked input (known only at run time) unless `links` (the validator's
    input_types) says the input is not linked: then it is a null the caller sent."""
    if value is None:
        if links is None or name in links:
            return None
        return f"{name}: null is no value of it; give one (its default is {_shown(_default(node, name))})"
    kind, options = input_spec(node, name)
    if isinstance(kind, list):
        return None if isinstance(value, str) and value in kind else f"{name}: {_shown(value)} is not a choice of it"
    if kind == "INT" and (isinstance(value, bool) or not isinstance(value, int)):
        return f"{name}: {_shown(value)} is not a whole number"
    if kind == "FLOAT" and (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)):
        return f"{name}: {_shown(value)} is not a finite number; give a number from {options.get('min')} to " \
               f"{options.get('max')}"
    if kind == "STRING":
        if not isinstance(value, str):
            return f"{name}: {_shown(value)} is not text"
        if len(value) > MAX_TEXT:
            return f"{name}: {len(value)} characters, at most {MAX_TEXT}"
    if "min" in options and value < options["min"]:
        return f"{name}: {value} is below its minimum {options['min']}"
    if "max" in options and value > options["max"]:
        return f"{name}: {value} is above its maximum {options['max']}"
    return None


def _default(node: type, name: str) -> object:
    kind, options = input_spec(node, name)
    return options.get("default", kind[0] if isinstance(kind, list) and kind else None)


def limits_problem(node: type, values: Mapping[str, object], links: Mapping[str, object] | None = None) -> str | None:
    """The first of `values` (input name -> value, as VALIDATE_INPUTS got them) that breaks its stated limits."""
    return next((problem for name, value in values.items() if (problem := stated_limits(node, name, value, links))),
                None)


def link_problem(node: type, links: Mapping[str, object] | None) -> str | None:
    """ComfyUI's check of each linked input's type (`links`: input name -> the type linked to it, the validator's
    input_types; None without ComfyUI), which ComfyUI skips for a validator that takes input_types."""
    for name, received in (links or {}).items():
        try:
            expected = input_spec(node, name)[0]
        except KeyError:
            continue
        if not bridge.link_fits(received, expected):
            shown = "a choice" if isinstance(expected, list) else expected
            return f"{name}: a {_shown(received)} output is linked to it and it takes {shown}; link a {shown} output"
    return None


def setting_problem(check: Callable[[], object], names: Mapping[str, str] | None = None) -> str | None:
    """The SettingError of `check()` (an ltx2_core check without model or file) as a VALIDATE_INPUTS message on the
    input at fault (`names`: ltx2_core's setting -> this node's input where they differ); None when it passes."""
    try:
        check()
    except SettingError as exc:
        return f"{(names or {}).get(exc.setting, exc.setting)}: {exc}"
    return None


def _kind_problem(path: str, kind: str) -> str | None:
    """Why `path` is not a `kind` file, as `check_kind` (and so the command line) says it; None when it is one."""
    try:
        check_kind(path, kind)
    except (LTX2Error, OSError, ValueError) as exc:
        return str(exc) or type(exc).__name__
    return None


def file_problem(kind: str, name: object, links: Mapping[str, object] | None = None) -> str | None:
    """Why the file picked for a `kind` input cannot be used, in ComfyUI's terms: not a file of the kind's models
    folder (a path, `..`, anything ComfyUI does not list there, a null), a file of another kind (then where it
    belongs), or else what the loader says is wrong with it (a damaged or truncated file, a GGUF of another family or
    of a type that does not load), the file named as the input shows it. None when fine, or when linked (None while
    `links` does not say otherwise: known at run time). Reads headers only; never echoes a file's content."""
    folder, _, input_name, _ = FILE_KINDS[kind]
    if name is None and (links is None or input_name in links):
        return None
    try:
        path = bridge.model_path(folder, name, marker="config.json" if kind == "text encoder" else None)
    except (OSError, ValueError) as exc:
        return f"{input_name}: {exc}"
    problem = _kind_problem(path, kind)
    if problem is None:
        return None
    shown = os.path.basename(str(name).rstrip("/\\"))
    for other, (other_folder, node, other_input, _) in FILE_KINDS.items():
        if other != kind and _kind_problem(path, other) is None:
            return (f"{input_name}: {shown} is {_article(other)} {other} file, not {_article(kind)} {kind}: put it in "
                    f"models/{other_folder} and pick it in {node} ({other_input}); here pick {FILE_KINDS[kind][3]} "
                    f"from models/{folder}")
    return f"{input_name}: {problem.replace(str(path), shown)}"


def _article(kind: str) -> str:
    return "an" if kind[0] in "aeiou" else "a"
