"""Gemma prompt tokenisation as the reference does it (spec §2): strip, BOS, truncate, left-pad to 1024 tokens.

The text -> ids step comes from a tokenizer library: SentencePiece for the model embedded in ComfyUI's single-file
text encoder (`spiece_model`), `transformers.AutoTokenizer` for a Hugging Face model folder (what the reference
loads). BOS, truncation and padding are done here, once, for both, so the two sources give identical batches.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch

from ltx2_core.errors import CheckpointError

MAX_TOKENS = 1024


class TokenBatch(NamedTuple):
    """Left-padded prompts: input_ids (B, tokens) int64, attention_mask (B, tokens) int64 (1 = prompt token)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor


class PromptTokenizer:
    """`tokenizer(["a cat", "blurry"])` -> TokenBatch of width `max_length`, BOS first, padding on the left."""

    def __init__(self, encode: Callable[[str], list[int]], *, bos_id: int, pad_id: int, source: str,
                 max_length: int = MAX_TOKENS) -> None:
        if max_length < 2:
            raise ValueError(f"max_length={max_length} must leave room for BOS and at least one token")
        self._encode = encode
        self.bos_id = bos_id
        self.pad_id = pad_id
        self.source = source
        self.max_length = max_length

    def __call__(self, prompts: Sequence[str]) -> TokenBatch:
        if isinstance(prompts, str) or not prompts:
            raise TypeError("pass a non-empty list of prompt strings")
        ids = torch.full((len(prompts), self.max_length), self.pad_id, dtype=torch.int64)
        mask = torch.zeros((len(prompts), self.max_length), dtype=torch.int64)
        for row, prompt in enumerate(prompts):
            if not isinstance(prompt, str):
                raise TypeError(f"prompt {row} is {type(prompt).__name__}, expected str")
            tokens = ([self.bos_id] + list(self._encode(prompt.strip())))[: self.max_length]
            ids[row, self.max_length - len(tokens):] = torch.tensor(tokens, dtype=torch.int64)
            mask[row, self.max_length - len(tokens):] = 1
        return TokenBatch(ids, mask)

    def with_max_length(self, max_length: int) -> PromptTokenizer:
        return PromptTokenizer(self._encode, bos_id=self.bos_id, pad_id=self.pad_id, source=self.source,
                               max_length=max_length)

    @classmethod
    def from_sentencepiece(cls, model: bytes, source: str, max_length: int = MAX_TOKENS) -> PromptTokenizer:
        """From a serialized SentencePiece model (ComfyUI's `spiece_model` tensor, or a `tokenizer.model` file)."""
        import sentencepiece

        processor = sentencepiece.SentencePieceProcessor()
        try:
            processor.LoadFromSerializedProto(model)
        except (RuntimeError, OSError) as exc:
            raise CheckpointError(f"{source}: the embedded SentencePiece tokenizer cannot be read ({exc}); "
                                  "the text encoder file is damaged, download it again") from exc
        bos, eos, pad = processor.bos_id(), processor.eos_id(), processor.pad_id()
        if bos < 0:
            raise CheckpointError(f"{source}: the SentencePiece tokenizer has no BOS token; not a Gemma tokenizer")
        return cls(lambda text: processor.encode(text), bos_id=bos, pad_id=pad if pad >= 0 else eos, source=source,
                   max_length=max_length)

    @classmethod
    def from_folder(cls, folder: str | os.PathLike, max_length: int = MAX_TOKENS) -> PromptTokenizer:
        """From a Hugging Face tokenizer folder (`tokenizer.json` / `tokenizer.model` + `tokenizer_config.json`)."""
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{folder}: no usable tokenizer files ({exc}); a Gemma 3 model folder has "
                                  "tokenizer.json / tokenizer.model next to config.json") from exc
        if tokenizer.bos_token_id is None:
            raise CheckpointError(f"{folder}: the tokenizer has no BOS token; not a Gemma tokenizer")
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        return cls(lambda text: tokenizer(text, add_special_tokens=False)["input_ids"], bos_id=tokenizer.bos_token_id,
                   pad_id=pad, source=str(folder), max_length=max_length)
