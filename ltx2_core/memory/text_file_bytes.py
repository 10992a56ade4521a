"""The text encoder's bytes as the text layout counts them (`memory.text_layout.TextBytes`: each Gemma layer, the
embeddings, the head, one prompt's hidden state), from the files' headers before any weight is read (issue 38,
item 2): the encoder is built with every weight on `meta` at the shape and dtype the load gives it
(`loader.text_parts`), and its tensors are counted, `meta` included. Equal to what
`parallel.text_encode.text_bytes` counts of the encoder once it is loaded whole.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from ltx2_core.loader.sources import Sources
from ltx2_core.loader.text_parts import TextPart
from ltx2_core.loader.text_weights import load_prompt_encoder
from ltx2_core.memory.text_layout import TextBytes
from ltx2_core.model.text import PromptEncoder


def module_bytes(module: nn.Module | None) -> int:
    """The bytes of a module's parameters and buffers, those on `meta` included (their loaded size)."""
    if module is None:
        return 0
    return sum(t.numel() * t.element_size() for t in (*module.parameters(), *module.buffers()))


def skeleton_bytes(encoder: PromptEncoder) -> TextBytes:
    """The `TextBytes` of an encoder whatever is loaded of it (every tensor counted at its size)."""
    model = encoder.gemma
    embed = model.embed_tokens.weight
    state = encoder.tokenizer.max_length * embed.shape[1] * embed.element_size()
    return TextBytes(tuple(module_bytes(layer) for layer in model.layers), module_bytes(model.embed_tokens),
                     module_bytes(model.norm) + module_bytes(encoder.projection), state)


def text_skeleton(text_encoder: str | os.PathLike, checkpoint: Sources | str | os.PathLike, *,
                  dtype: torch.dtype | None = None, max_length: int | None = None) -> PromptEncoder:
    """The prompt encoder with no weight read (headers and the tokenizer only): its structure, config and sizes."""
    return load_prompt_encoder(text_encoder, checkpoint, dtype=dtype, max_length=max_length,
                               part=TextPart.nothing())


def text_file_bytes(text_encoder: str | os.PathLike, checkpoint: Sources | str | os.PathLike, *,
                    dtype: torch.dtype | None = None, max_length: int | None = None) -> TextBytes:
    """The text layout's byte counts of a prompt encoder loaded from these files with `dtype`, from the headers."""
    return skeleton_bytes(text_skeleton(text_encoder, checkpoint, dtype=dtype, max_length=max_length))
