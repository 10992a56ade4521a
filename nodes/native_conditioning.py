"""ComfyUI's native LTX-2 CONDITIONING and our text embeddings, both ways (torch only; docs/interop/conditioning.md).

ComfyUI's CONDITIONING is a list of entries `[cond, options]`. For LTX-2 `cond` is (B, tokens, W) float and:
* `options["unprocessed_ltxav_embeds"]` True (what LTXAVTextEncoderLoader + CLIPTextEncode give): the text features
  after the projection, padding trimmed (the prompt's real tokens only), not yet through the connectors, which
  native runs inside the diffusion model. 2.3: W = video + audio projection widths (4096 + 2048), split there;
  2.0: W = 3840, the same features for both connectors;
* unflagged: connector outputs, concat(video, audio) on the last dim, which the native model uses as they are.
`frame_rate` (LTXVConditioning) is the clip's frame rate. `from_native` runs the flagged features through our
connectors exactly as our `PromptEncoder` does after its projection (left-padded with a mask to the register
multiple of at least `MIN_TOKENS`, as the native tokenizer and connectors pad), so the result is what our own
encoding of the same prompt gives; `to_native` gives our connector outputs unflagged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ltx2_core.model.text.connector import EmbeddingsConnector
from ltx2_core.types import TextEmbeddings

UNPROCESSED = "unprocessed_ltxav_embeds"
FRAME_RATE = "frame_rate"
MIN_TOKENS = 1024  # ComfyUI's Gemma tokenizer's min_length, and its connectors' least length max(1024, tokens)
IMAGE_OR_GUIDE = ("use LTX-2 Image Condition (first / last / any frame) for images, or LTX-2 Video Guide (IC-LoRA "
                  "control) for control videos, into our sampler instead of LTXVAddGuide")
# option keys whose meaning our sampler cannot keep -> (what set it, the fix); None values mean absent
REFUSED = {
    "keyframe_idxs": ("native guide frames (LTXVAddGuide)", IMAGE_OR_GUIDE),
    "guide_attention_entries": ("native guide attention (LTXVAddGuide)", IMAGE_OR_GUIDE),
    "ref_audio": ("ID-LoRA reference audio (LTXV Reference Audio)",
                  "this pack has no reference-audio conditioning; remove that node or sample with ComfyUI's sampler"),
    "area": ("area conditioning (Conditioning (Set Area))", "LTX-2 conditions the whole clip; remove that node"),
    "mask": ("mask conditioning (Conditioning (Set Mask))", "LTX-2 conditions the whole clip; remove that node"),
    "control": ("a ControlNet (Apply ControlNet)", "use LTX-2 Video Guide (IC-LoRA control) instead"),
    "gligen": ("GLIGEN boxes", "remove that node"),
    "hooks": ("conditioning hooks (scheduled LoRA / CLIP hooks)", "remove them; load LoRAs with LTX-2 LoRA Loader"),
}


def _entries(conditioning: object) -> list[tuple[torch.Tensor, dict]]:
    if not isinstance(conditioning, (list, tuple)) or not conditioning:
        raise ValueError(f"conditioning: expected ComfyUI's CONDITIONING (a list of [tensor, dict] entries, e.g. "
                         f"from CLIPTextEncode), got {type(conditioning).__name__} {str(conditioning)[:40]!r}")
    entries = []
    for i, entry in enumerate(conditioning):
        if (not isinstance(entry, (list, tuple)) or len(entry) != 2 or not isinstance(entry[0], torch.Tensor)
                or entry[0].ndim != 3 or not isinstance(entry[1], dict)):
            raise ValueError(f"conditioning: entry {i} is not [tensor (B, tokens, width), dict]; give ComfyUI's "
                             "CONDITIONING from CLIPTextEncode with LTXAVTextEncoderLoader's CLIP")
        entries.append((entry[0], entry[1]))
    return entries


def _check_options(i: int, options: dict) -> None:
    for key, (what, fix) in REFUSED.items():
        if options.get(key) is not None:
            raise ValueError(f"conditioning: entry {i} carries {what} ({key!r}), which LTX-2 Sampler cannot use; {fix}")
    start, end = options.get("start_percent", 0.0), options.get("end_percent", 1.0)
    if start != 0.0 or end != 1.0:
        raise ValueError(f"conditioning: entry {i} is limited to the sampling range {start:g}-{end:g} (Conditioning "
                         "Set Timestep Range); LTX-2 Sampler uses one prompt for all steps: remove that node")
    if options.get("strength", 1.0) != 1.0:
        raise ValueError(f"conditioning: entry {i} has strength {options['strength']:g} (Conditioning (Set Area "
                         "Strength) / Set Mask); LTX-2 Sampler weighs prompts with its guidance: remove that node")


def _frame_rate(entries: Sequence[tuple[torch.Tensor, dict]]) -> float | None:
    rates = {float(options[FRAME_RATE]) for _, options in entries if options.get(FRAME_RATE) is not None}
    if len(rates) > 1:
        raise ValueError(f"conditioning: its entries state different frame rates {sorted(rates)}; give them one "
                         "LTXVConditioning")
    return rates.pop() if rates else None


def _width_problem(i: int, width: int, video_width: int, audio_width: int | None, flagged: bool) -> ValueError:
    kind = "text features (before the connectors)" if flagged else "text contexts (connector outputs)"
    if audio_width is None:
        fits = f"more than {video_width}"
    else:
        fits = f"{video_width} + {audio_width} = {video_width + audio_width}"
        fits += f" (or {video_width}: one projection for both)" if flagged and video_width == audio_width else ""
    return ValueError(f"conditioning: entry {i} holds {kind} of width {width}, and this model's are {fits} wide: "
                      "it was encoded for another model; encode the prompt with the text encoder of this model's "
                      "release (LTXAVTextEncoderLoader with this checkpoint, or LTX-2 Text Encode)")


def _padded_tokens(real: int, connectors: tuple[EmbeddingsConnector, EmbeddingsConnector]) -> int:
    """The register multiple of max(MIN_TOKENS, real) tokens: native's connectors' length, our encoder's 1024."""
    registers = math.lcm(connectors[0].config.num_registers, connectors[1].config.num_registers)
    return registers * math.ceil(max(MIN_TOKENS, real) / registers)


def _check_entry(i: int, cond: torch.Tensor, options: dict,
                 connectors: tuple[EmbeddingsConnector, EmbeddingsConnector] | None, video_width: int
                 ) -> tuple[int, int]:
    """ValueError naming the fix for what our sampler cannot use; else the entry's (tokens, video + audio width)
    once converted."""
    _check_options(i, options)
    width = cond.shape[-1]
    audio_width = None if connectors is None else connectors[1].config.width
    if options.get(UNPROCESSED):
        if connectors is None:
            raise ValueError("conditioning: it holds text features the model's connectors must still process "
                             "(LTXAVTextEncoderLoader's); give the node the LTX-2 model they belong to")
        if width not in (video_width + audio_width, video_width if video_width == audio_width else -1):
            raise _width_problem(i, width, video_width, audio_width, flagged=True)
        return _padded_tokens(cond.shape[1], connectors), video_width + audio_width
    if width <= video_width or (audio_width is not None and width != video_width + audio_width):
        raise _width_problem(i, width, video_width, audio_width, flagged=False)
    return cond.shape[1], width


def _connect(features: torch.Tensor, connectors: tuple[EmbeddingsConnector, EmbeddingsConnector]) -> TextEmbeddings:
    """Flagged features (B, n real tokens, W) -> our connector outputs, padded on the left with a mask to
    `_padded_tokens`, as our encoder pads (and native's connectors fill). W: video + audio widths, split there, or
    the one width of both connectors (LTX-2.0: one projection feeds both)."""
    video_connector, audio_connector = connectors
    video_width, audio_width = video_connector.config.width, audio_connector.config.width
    if features.shape[-1] == video_width + audio_width:
        video, audio = features.split([video_width, audio_width], dim=-1)
    else:
        video = audio = features
    batch, real = features.shape[:2]
    tokens = _padded_tokens(real, connectors)
    mask = torch.cat([features.new_zeros(batch, tokens - real, dtype=torch.long),
                      features.new_ones(batch, real, dtype=torch.long)], dim=1)
    outputs = []
    for part, connector in ((video, video_connector), (audio, audio_connector)):
        weight = connector.learnable_registers
        padded = torch.cat([part.new_zeros(batch, tokens - real, part.shape[-1]), part], dim=1)
        outputs.append(connector(padded.to(weight.device, weight.dtype), mask.to(weight.device)))
    return TextEmbeddings(*outputs)


@torch.no_grad()
def check_native(conditioning: object) -> None:
    """The checks of `from_native` that need no model (the entries' form and options: native guides, areas, masks,
    timestep ranges, strengths), for a caller to run before it loads anything."""
    for i, (_, options) in enumerate(_entries(conditioning)):
        _check_options(i, options)


def from_native(conditioning: object, connectors: tuple[EmbeddingsConnector, EmbeddingsConnector] | None,
                video_width: int) -> tuple[TextEmbeddings, float | None]:
    """ComfyUI's CONDITIONING -> (our TextEmbeddings: the entries batched in order, frame_rate or None).

    connectors: the model's (video, audio) EmbeddingsConnector, for flagged entries (None: only connector outputs
    are taken); video_width: the video text context's width (the split point of unflagged entries). Flagged entries
    come out on the connectors' device and dtype, unflagged ones as given. Everything is checked before a connector
    runs: ValueError naming the fix for native guides, area / mask / timestep-range conditioning, widths of another
    model, entries that cannot batch."""
    entries = _entries(conditioning)
    if connectors is not None and connectors[0].config.width != video_width:
        raise ValueError(f"video_width {video_width} is not the video connector's width "
                         f"{connectors[0].config.width}")
    shapes = [_check_entry(i, cond, options, connectors, video_width) for i, (cond, options) in enumerate(entries)]
    frame_rate = _frame_rate(entries)
    tokens, widths = [tokens for tokens, _ in shapes], sorted({width for _, width in shapes})
    if len(widths) > 1:
        raise ValueError(f"conditioning: its entries are {widths} wide, encoded for different models; encode every "
                         "prompt with the text encoder of this model's release")
    if len(set(tokens)) > 1:
        raise ValueError(f"conditioning: its {len(entries)} entries (Conditioning (Combine) / (Concat)) hold "
                         f"{tokens} tokens, which cannot make one batch; encode one prompt per conditioning (each "
                         f"under {MIN_TOKENS} tokens), or combine them before encoding into one prompt")
    parts = []
    for cond, options in entries:
        if options.get(UNPROCESSED):
            parts.append(_connect(cond, connectors))
        else:
            parts.append(TextEmbeddings(*cond.split([video_width, cond.shape[-1] - video_width], dim=-1)))
    if len(parts) == 1:
        return parts[0], frame_rate
    device, dtype = parts[0].video.device, parts[0].video.dtype
    video = torch.cat([p.video.to(device, dtype) for p in parts])
    audio = torch.cat([p.audio.to(device, dtype) for p in parts])
    return TextEmbeddings(video, audio), frame_rate


def to_native(embeddings: TextEmbeddings, frame_rate: float | None = None) -> list[list]:
    """Our TextEmbeddings -> ComfyUI's CONDITIONING: one entry, concat(video, audio) (B, tokens, Dv + Da) float32
    on their device, unflagged (the native model takes connector outputs as they are), with `frame_rate` (as
    LTXVConditioning sets it) when given and `pooled_output` None (as CLIPTextEncode's)."""
    if embeddings.video.shape[:2] != embeddings.audio.shape[:2]:
        raise ValueError(f"the video and audio text contexts differ in batch or tokens: "
                         f"{tuple(embeddings.video.shape)} and {tuple(embeddings.audio.shape)}")
    cond = torch.cat([embeddings.video.float(), embeddings.audio.float().to(embeddings.video.device)], dim=-1)
    options: dict = {"pooled_output": None}
    if frame_rate is not None:
        options[FRAME_RATE] = float(frame_rate)
    return [[cond, options]]
