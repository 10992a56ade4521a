"""The text-backbone seam: what the prompt encoder needs from a language model family, and the registry that picks
one (by a config.json `model_type`, or by its weight names for a file without a config).

A backbone builds its model on `meta` from config values, rebuilds what a checkpoint does not store, and returns
the hidden states of every layer for a token batch; the files (where its tensors are, which tokenizer) are found
by `loader.gemma_files`, which asks the backbone for the family-specific parts: the config values of a config.json
or of a file that has none. Gemma 3 (`gemma3`, LTX-2.0 and 2.3) and Gemma 4 (`gemma4`, LTX-2.5) are the
implementations; another family is one new module plus its line in `_REGISTERED`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol

import torch
from torch import nn

from ltx2_core.model.text.gemma3 import GEMMA3
from ltx2_core.model.text.gemma4 import GEMMA4


class TextBackbone(Protocol):
    """A language-model family whose hidden states feed the LTX-2 text projection."""

    name: str  # the family in messages, e.g. "Gemma 3"
    model_types: tuple[str, ...]  # the config.json `model_type`s that name it (multimodal and text-only)

    def text_values(self, raw: Mapping[str, Any], where: str) -> dict[str, Any]:
        """The text model's config values from a config.json (`where` names it in errors), defaults filled in."""
        ...

    def recognizes(self, keys: Collection[str]) -> bool:
        """Whether a language model's keys (prefix stripped) are this family's: for files without a config."""
        ...

    def values_from_shapes(self, shapes: Mapping[str, Sequence[int]], where: str) -> dict[str, Any]:
        """Config values of a file without a config: sizes read off its weight shapes (model key -> shape)."""
        ...

    def build(self, values: Mapping[str, Any]) -> nn.Module:
        """The language model on `meta` (no memory, no init), in eval mode without gradients."""
        ...

    def materialize_buffers(self, model: nn.Module, device: torch.device | str, partial: bool = False) -> None:
        """Recomputes on `device` the buffers a meta build leaves empty and files do not store (`partial`: other
        tensors may stay on `meta`, else that is an error)."""
        ...

    def hidden_states(self, model: nn.Module, input_ids: torch.Tensor,
                      attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """input_ids, attention_mask (B, T) -> layers + 1 hidden states (B, T, hidden size): the embeddings, then
        each layer's output (the last after the final norm)."""
        ...

    # prompt enhancement (`model.text.enhance`): KV-cached decoding on the same model
    def new_cache(self, model: nn.Module) -> Any:
        """An empty KV cache for `decode`."""
        ...

    def decode(self, model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
               positions: torch.Tensor, cache: Any, embeds: torch.Tensor | None = None) -> torch.Tensor:
        """The new tokens (B, t) at `positions`, the mask of everything so far (B, past + t), the cache extended in
        place -> the last token's final hidden state (B, D). `embeds`: input embeddings in place of the ids'."""
        ...

    def final_softcap(self, model: nn.Module) -> float | None:
        """The logits' tanh cap (None: none)."""
        ...


# LTX-2 was trained on Gemma 3 12B: it answers for files nothing recognises, so their errors name what to use.
DEFAULT: TextBackbone = GEMMA3
_REGISTERED: list[TextBackbone] = [GEMMA3, GEMMA4]


def registered() -> tuple[TextBackbone, ...]:
    return tuple(_REGISTERED)


def register(backbone: TextBackbone) -> TextBackbone:
    """Adds a backbone (the registry line of a new family); returns it."""
    _REGISTERED.append(backbone)
    return backbone


def backbone_for(model_type: str | None) -> TextBackbone | None:
    """The backbone a config.json `model_type` names (None: no registered family)."""
    return next((b for b in _REGISTERED if model_type in b.model_types), None)


def backbone_for_keys(keys: Collection[str]) -> TextBackbone:
    """The backbone whose weight names these are, else `DEFAULT` (whose checks then say what is wrong)."""
    return next((b for b in _REGISTERED if b.recognizes(keys)), DEFAULT)


def backbone_of(model: nn.Module) -> TextBackbone:
    """The backbone of a built language model, by its config's `model_type`."""
    model_type = getattr(getattr(model, "config", None), "model_type", None)
    backbone = backbone_for(model_type)
    if backbone is None:
        raise ValueError(f"no text backbone is registered for model_type {model_type!r} (registered: "
                         f"{', '.join(b.name for b in _REGISTERED)}); pass `backbone=` explicitly")
    return backbone
