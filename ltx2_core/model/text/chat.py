"""Gemma's chat turns as token ids, for prompt enhancement (`model.text.enhance`).

A `ChatCodec` is what a tokenizer source offers for chatting: rendering the messages to text (the chat template of
the Gemma folder or file when it has one, rendered as transformers renders it: a sandboxed jinja2 environment with
`trim_blocks` / `lstrip_blocks`; else `gemma_turns`, our own writer of Gemma's turn format), that text to ids (special
tokens matched first, BOS added as the tokenizer adds it) and generated ids back to text (special tokens skipped).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Gemma 3's turn and image tokens (special tokens of its tokenizer)
GEMMA_SPECIAL = ("<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>", "<image_soft_token>")
Messages = Sequence[Mapping[str, Any]]
# google/gemma-3-12b-it's config.json `eos_token_id` (<eos>, <end_of_turn>): generation stops at either; ComfyUI's
# single file has no config, so this is what it stops at
GEMMA3_EOS = (1, 106)
GEMMA3_IMAGE_TOKEN_ID = 262144  # <image_soft_token>: an added token of tokenizer.json, not in the SentencePiece model


def gemma_turns(messages: Messages, bos_token: str, add_generation_prompt: bool = True) -> str:
    """Gemma's turn format (what Gemma 3's released chat template writes): BOS; a system message becomes the first
    user turn's prefix (followed by a blank line); each turn `<start_of_turn>{user|model}\\n{content}<end_of_turn>\\n`,
    a string content trimmed, a list's text items trimmed and image items as `<start_of_image>`; then
    `<start_of_turn>model\\n` to ask for the answer."""
    messages = list(messages)
    prefix = ""
    if messages and messages[0]["role"] == "system":
        content = messages[0]["content"]
        prefix = (content if isinstance(content, str) else content[0]["text"]) + "\n\n"
        messages = messages[1:]
    parts = [bos_token]
    for index, message in enumerate(messages):
        if (message["role"] == "user") != (index % 2 == 0):
            raise ValueError("conversation roles must alternate user/assistant/user/assistant/...")
        role = "model" if message["role"] == "assistant" else message["role"]
        parts.append(f"<start_of_turn>{role}\n" + (prefix if index == 0 else ""))
        content = message["content"]
        if isinstance(content, str):
            parts.append(content.strip())
        else:
            for item in content:
                if item["type"] == "image":
                    parts.append("<start_of_image>")
                elif item["type"] == "text":
                    parts.append(item["text"].strip())
        parts.append("<end_of_turn>\n")
    if add_generation_prompt:
        parts.append("<start_of_turn>model\n")
    return "".join(parts)


def render_template(template: str, messages: Messages, special_tokens: Mapping[str, str]) -> str:
    """A chat template (jinja2) rendered for `messages` with the generation prompt, as transformers renders it."""
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise ValueError(f"the chat template refused the messages: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=list(messages), add_generation_prompt=True, **special_tokens)


@dataclass(frozen=True)
class ChatCodec:
    """render: messages -> text; encode: text -> ids; decode: ids -> text without special tokens; `template` the
    chat template's source (None: our `gemma_turns`); `eos_ids` the ids generation stops at (the model config's
    `eos_token_id`, top level first, as transformers reads it)."""

    render: Callable[[Messages], str]
    encode: Callable[[str], list[int]]
    decode: Callable[[list[int]], str]
    template: str | None = None
    eos_ids: tuple[int, ...] = GEMMA3_EOS


def eos_ids(raw_config: Mapping[str, Any]) -> tuple[int, ...] | None:
    """A config.json's `eos_token_id` (top level, else its text_config's) as a tuple; None when it names none."""
    value = raw_config.get("eos_token_id")
    if value is None:
        value = (raw_config.get("text_config") or {}).get("eos_token_id")
    if value is None:
        return None
    return tuple(value) if isinstance(value, (list, tuple)) else (int(value),)


def split_special(text: str, specials: Mapping[str, int], encode: Callable[[str], list[int]]) -> list[int]:
    """Text -> ids with the special tokens' strings matched first (as tokenizers match added tokens) and the text
    between them encoded by `encode`."""
    if not specials:
        return list(encode(text))
    pattern = re.compile("|".join(re.escape(s) for s in sorted(specials, key=len, reverse=True)))
    ids: list[int] = []
    start = 0
    for match in pattern.finditer(text):
        if match.start() > start:
            ids += encode(text[start:match.start()])
        ids.append(specials[match.group()])
        start = match.end()
    if start < len(text):
        ids += encode(text[start:])
    return ids


def sentencepiece_codec(processor: Any, bos: int, eos: int, pad: int) -> ChatCodec:
    """ComfyUI's single file (a SentencePiece model, no template): Gemma's turn format, BOS added by the tokenizer as
    Gemma 3's `add_bos_token` does (so after the template's own BOS, as the reference's processor tokenizes)."""
    specials = {"<bos>": bos, "<eos>": eos, "<pad>": pad}
    unknown = processor.unk_id()
    for token in GEMMA_SPECIAL:
        piece = processor.piece_to_id(token)
        if piece != unknown:
            specials[token] = piece
    specials.setdefault("<image_soft_token>", GEMMA3_IMAGE_TOKEN_ID)
    skipped = set(specials.values())
    size = processor.get_piece_size()

    def encode(text: str) -> list[int]:
        return [bos] + split_special(text, specials, processor.encode)

    def decode(ids: Iterable[int]) -> str:
        # ids past the vocabulary (a model row no piece has) are dropped, as transformers decodes them to nothing
        return processor.decode([i for i in ids if i < size and i not in skipped and not processor.is_control(i)])

    return ChatCodec(lambda messages: gemma_turns(messages, "<bos>"), encode, decode)


def template_codec(template: str | None, special_tokens: Mapping[str, str], encode: Callable[[str], list[int]],
                   decode: Callable[[list[int]], str]) -> ChatCodec:
    """A codec rendering `template` (None: `gemma_turns`) with the tokenizer's special token strings."""
    if template is None:
        return ChatCodec(lambda messages: gemma_turns(messages, special_tokens.get("bos_token", "<bos>")),
                         encode, decode)
    return ChatCodec(lambda messages: render_template(template, messages, special_tokens), encode, decode, template)
