"""Gemma prompt tokenisation as the reference does it (spec §2): strip, BOS, truncate, left-pad to 1024 tokens.

The text -> ids step comes from a tokenizer library: SentencePiece for the model embedded in ComfyUI's single-file
text encoder (`spiece_model`), `transformers.AutoTokenizer` for a Hugging Face model folder (what the reference
loads), `tokenizers` for the tokenizer.json bytes LTX-2.5's Gemma 4 file embeds (`tokenizer_json`). BOS, truncation
and padding are done here, once, for all, so the sources give identical batches. Gemma 4 (ltx-core 1.2.0) adds BOS
only when the tokenizer did not (`bos_if_absent`); Gemma 3 always prepends it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import torch

from ltx2_core.errors import CheckpointError
from ltx2_core.model.text.chat import ChatCodec, sentencepiece_codec, template_codec

MAX_TOKENS = 1024


class TokenBatch(NamedTuple):
    """Left-padded prompts: input_ids (B, tokens) int64, attention_mask (B, tokens) int64 (1 = prompt token)."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor


class PromptTokenizer:
    """`tokenizer(["a cat", "blurry"])` -> TokenBatch of width `max_length`, BOS first, padding on the left."""

    def __init__(self, encode: Callable[[str], list[int]], *, bos_id: int, pad_id: int, source: str,
                 max_length: int = MAX_TOKENS, bos_if_absent: bool = False, chat: ChatCodec | None = None) -> None:
        if max_length < 2:
            raise ValueError(f"max_length={max_length} must leave room for BOS and at least one token")
        self._encode = encode
        self.bos_id = bos_id
        self.pad_id = pad_id
        self.source = source
        self.max_length = max_length
        self.bos_if_absent = bos_if_absent
        self.chat = chat  # chat turns for prompt enhancement (model.text.chat); None: this source cannot chat

    def __call__(self, prompts: Sequence[str]) -> TokenBatch:
        if isinstance(prompts, str) or not prompts:
            raise TypeError("pass a non-empty list of prompt strings")
        ids = torch.full((len(prompts), self.max_length), self.pad_id, dtype=torch.int64)
        mask = torch.zeros((len(prompts), self.max_length), dtype=torch.int64)
        for row, prompt in enumerate(prompts):
            if not isinstance(prompt, str):
                raise TypeError(f"prompt {row} is {type(prompt).__name__}, expected str")
            tokens = list(self._encode(prompt.strip()))
            if not (self.bos_if_absent and tokens and tokens[0] == self.bos_id):
                tokens = [self.bos_id] + tokens
            tokens = tokens[: self.max_length]
            ids[row, self.max_length - len(tokens):] = torch.tensor(tokens, dtype=torch.int64)
            mask[row, self.max_length - len(tokens):] = 1
        return TokenBatch(ids, mask)

    def with_max_length(self, max_length: int) -> PromptTokenizer:
        return PromptTokenizer(self._encode, bos_id=self.bos_id, pad_id=self.pad_id, source=self.source,
                               max_length=max_length, bos_if_absent=self.bos_if_absent, chat=self.chat)

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
        pad = pad if pad >= 0 else eos
        return cls(lambda text: processor.encode(text), bos_id=bos, pad_id=pad, source=source,
                   max_length=max_length, chat=sentencepiece_codec(processor, bos, eos, pad))

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
        # chat text is tokenized as the reference's processor does: special tokens on (Gemma 3 adds BOS)
        chat = template_codec(getattr(tokenizer, "chat_template", None), _special_strings(tokenizer.special_tokens_map),
                              lambda text: tokenizer(text)["input_ids"],
                              lambda ids: tokenizer.decode(ids, skip_special_tokens=True))
        return cls(lambda text: tokenizer(text, add_special_tokens=False)["input_ids"], bos_id=tokenizer.bos_token_id,
                   pad_id=pad, source=str(folder), max_length=max_length, chat=chat)

    @classmethod
    def from_tokenizer_json(cls, tokenizer_json: bytes, tokenizer_config: Mapping[str, Any], source: str,
                            max_length: int = MAX_TOKENS, chat_template: str | None = None) -> PromptTokenizer:
        """From tokenizer.json bytes and its tokenizer_config.json (LTX-2.5's Gemma 4 file), as ltx-core 1.2.0 builds
        its `PreTrainedTokenizerFast`: the special tokens named by the config, its `add_bos_token` / `add_eos_token`
        (when given) replacing the file's post-processor, BOS prepended only when absent, pad = pad token else EOS."""
        from tokenizers import Tokenizer, processors

        try:
            backend = Tokenizer.from_buffer(tokenizer_json)
        except Exception as exc:  # tokenizers raises a bare Exception on a malformed tokenizer.json
            raise CheckpointError(f"{source}: the embedded tokenizer.json cannot be read ({exc}); the text encoder "
                                  "file is damaged, download it again") from exc
        json_padding = backend.padding  # transformers takes the pad token from here when the config names none
        backend.no_padding()
        backend.no_truncation()
        names = {role: _token_name(tokenizer_config.get(f"{role}_token")) for role in ("bos", "eos", "pad")}
        if names["pad"] is None and json_padding is not None:
            names["pad"] = json_padding["pad_token"]
        ids = {}
        for role in ("bos", "eos", "pad"):
            token = names[role]
            ids[role] = None if token is None else backend.token_to_id(token)
            if token is not None and ids[role] is None:
                raise CheckpointError(f"{source}: the tokenizer config's {role}_token {token!r} is not in its "
                                      "vocabulary; the text encoder file is damaged")
        if ids["bos"] is None:
            raise CheckpointError(f"{source}: the tokenizer config names no bos_token; not a Gemma tokenizer")
        if "add_bos_token" in tokenizer_config or "add_eos_token" in tokenizer_config:
            # as transformers' TokenizersBackend: explicit flags replace the file's post-processor by this template
            single, specials = ["$A:0"], []
            for role, flag, at in (("bos", "add_bos_token", 0), ("eos", "add_eos_token", 1)):
                if tokenizer_config.get(flag) and ids[role] is not None:
                    name = _token_name(tokenizer_config[f"{role}_token"])
                    single.insert(at * len(single), f"{name}:0")
                    specials.append((name, ids[role]))
            backend.post_processor = processors.TemplateProcessing(single=" ".join(single), special_tokens=specials)
        pad = ids["pad"] if ids["pad"] is not None else ids["eos"]
        if pad is None:
            raise CheckpointError(f"{source}: the tokenizer config names neither a pad_token nor an eos_token")
        # truncated with the rest in __call__ (1.2.0 truncates before adding BOS: the same ids unless the
        # post-processor appends EOS to a prompt longer than max_length)
        template = chat_template or tokenizer_config.get("chat_template")
        strings = {f"{role}_token": name for role, name in names.items() if name is not None}
        chat = template_codec(template if isinstance(template, str) else None, strings,
                              lambda text: backend.encode(text).ids,
                              lambda ids: backend.decode(ids, skip_special_tokens=True))
        return cls(lambda text: backend.encode(text).ids, bos_id=ids["bos"], pad_id=pad, source=source,
                   max_length=max_length, bos_if_absent=True, chat=chat)


def _special_strings(tokens: Mapping[str, Any]) -> dict[str, str]:
    """A tokenizer's special tokens as the strings a chat template reads (bos_token, eos_token, ...)."""
    return {k: v for k, v in tokens.items() if isinstance(v, str)}

def _token_name(token: Any) -> str | None:
    """A special token of tokenizer_config.json: a string, or an AddedToken dict with its `content`."""
    return token.get("content") if isinstance(token, dict) else token


def tokenizer_config_json(data: bytes | str, source: str) -> dict[str, Any]:
    """tokenizer_config.json's contents (CheckpointError when it is not a JSON object)."""
    try:
        config = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{source}: the embedded tokenizer_config.json is not valid JSON ({exc})") from exc
    if not isinstance(config, dict):
        raise CheckpointError(f"{source}: the embedded tokenizer_config.json is not a JSON object")
    return config
