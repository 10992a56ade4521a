"""The layouts an LTX-2 transformer's tensors come in, told apart by key names so that errors name the layout.

* the official single file (Lightricks' ltx-2-19b-dev.safetensors, ltx-2.3-22b-dev.safetensors): the DiT under
  `model.diffusion_model.` next to the VAEs, the vocoder and the text path, and a `config` metadata entry. ComfyUI's
  CheckpointSave and ModelSave write the same names but no `config` (their metadata holds the prompt and workflow);
* transformer-only exports with the official names: bare (`transformer_blocks.0.attn1.to_q.weight`, the model's own
  state dict, which ComfyUI's UNETLoader also reads) or under `diffusion_model.` (a ComfyUI model's state dict,
  without the leading `model.`);
* diffusers' `LTX2VideoTransformer3DModel`, renamed by diffusers' `scripts/convert_ltx2_to_diffusers.py`:
  `proj_in`, `time_embed`, `av_cross_attn_*`, `attn1.norm_q`, `video_a2v_cross_attn_scale_shift_table`, ….

Decision: a transformer-only export holds the official tensors under another prefix, so it is loaded (the prefix
stripped) whenever the model's shape is known: from the file's `config` metadata or from an explicit config. Without
either, MissingConfigError names the layout and asks for the full checkpoint or a config (such a file never holds the
VAEs or the vocoder; they come from the full checkpoint). diffusers' names are refused with UnsupportedLayoutError:
renaming them back would be a second key map to keep in step with diffusers, and the official file holds the same
weights.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ltx2_core.errors import MissingConfigError, UnsupportedLayoutError
from ltx2_core.loader.safetensors_file import SafetensorsFile
from ltx2_core.loader.sources import BUNDLE, Component

# the released single-file checkpoint (DiT, text projection, VAEs, vocoder) of each release that ships one
RELEASED_CHECKPOINTS = {"2.0": "ltx-2-19b-dev.safetensors", "2.3": "ltx-2.3-22b-dev.safetensors"}
FULL_CHECKPOINTS = " or ".join(f"{name} (LTX-{release})" for release, name in RELEASED_CHECKPOINTS.items()) + \
    " from Lightricks"
# a per-block parameter every LTX-2 version has, once under the official name and once under diffusers' rename
_OFFICIAL_BLOCK = re.compile(r"^(.*?)transformer_blocks\.\d+\.scale_shift_table_a2v_ca_video$")
_DIFFUSERS_BLOCK = re.compile(r"(^|\.)transformer_blocks\.\d+\.video_a2v_cross_attn_scale_shift_table$")
_DIFFUSERS_TOP = ("audio_time_embed.linear.weight", "audio_proj_in.weight")
# what ComfyUI's checkpoint saving leaves in a file: its metadata entries and the text encoder's prefix
_COMFYUI_METADATA = ("prompt", "workflow")
_COMFYUI_TEXT_ENCODERS = "text_encoders."


class TransformerLayout(NamedTuple):
    """Where a file keeps the DiT's tensors: their key prefix, and the layout's name for messages."""

    prefix: str
    name: str


_BUNDLED = BUNDLE[Component.TRANSFORMER]
OFFICIAL = TransformerLayout(_BUNDLED, f"the official single-file layout ({_BUNDLED!r})")
_EXPORTS = {
    "diffusion_model.": TransformerLayout(
        "diffusion_model.", "official LTX-2 names under 'diffusion_model.', a ComfyUI model's state dict"
    ),
    "": TransformerLayout("", "official LTX-2 names with no prefix, the bare transformer state dict"),
}


def transformer_layout(file: SafetensorsFile, expected: str = OFFICIAL.prefix) -> TransformerLayout:
    """The layout of the DiT's tensors in `file`; UnsupportedLayoutError for diffusers' names.

    `expected` (the prefix its `Source` gives) wins when blocks are found under it; otherwise the prefix is read off
    the block names, so a transformer-only export picked as a checkpoint loads too. A file without any recognisable
    LTX-2 block is taken as official, so the generic checks report what is wrong.
    """
    prefixes = sorted({m.group(1) for name in file.tensors if (m := _OFFICIAL_BLOCK.match(name))})
    for prefix in (expected, OFFICIAL.prefix):
        if prefix in prefixes:
            return _layout(prefix)
    if any(_DIFFUSERS_BLOCK.search(name) or name.endswith(_DIFFUSERS_TOP) for name in file.tensors):
        raise UnsupportedLayoutError(
            f"{file.path}: this is a diffusers-format LTX-2 transformer (LTX2VideoTransformer3DModel: proj_in, "
            "time_embed, attn1.norm_q, … instead of the official patchify_proj, adaln_single, attn1.q_norm), which "
            f"this loader does not read; load the official single-file checkpoint instead: {FULL_CHECKPOINTS}"
        )
    if not prefixes:
        return OFFICIAL
    return _layout(prefixes[0])


def _layout(prefix: str) -> TransformerLayout:
    if prefix == OFFICIAL.prefix:
        return OFFICIAL
    return _EXPORTS.get(prefix) or TransformerLayout(prefix, f"official LTX-2 names under {prefix!r}")


def check_transformer_metadata(file: SafetensorsFile, layout: TransformerLayout) -> None:
    """MissingConfigError naming the layout when `file` has no `config` metadata and the layout explains why.

    Other files without a config are left to the generic check, which asks for an official checkpoint.
    """
    if "config" in file.metadata:
        return
    if layout != OFFICIAL:
        raise MissingConfigError(
            f"{file.path}: a transformer-only file ({layout.name}) without 'config' metadata, so the model shape is "
            f"unknown. The loader needs the full single-file checkpoint, {FULL_CHECKPOINTS}, which also holds the "
            "VAEs and the vocoder, or an explicit config (e.g. TransformerConfig.from_metadata({...}))"
        )
    if any(key in file.metadata for key in _COMFYUI_METADATA) or any(
        name.startswith(_COMFYUI_TEXT_ENCODERS) for name in file.tensors
    ):
        raise MissingConfigError(
            f"{file.path}: saved by ComfyUI (CheckpointSave / ModelSave keep the official 'model.diffusion_model.' "
            "names but drop the 'config' metadata), so the model shape is unknown. Load the original checkpoint, "
            f"{FULL_CHECKPOINTS}, or pass an explicit config (e.g. TransformerConfig.from_metadata({{...}}))"
        )
