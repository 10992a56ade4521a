"""The demo's text path: a tiny random-weight Gemma 3 with a SentencePiece tokenizer trained in code, and the text
projection that fits the demo transformer."""

from __future__ import annotations

import torch

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.demo.transformer import random_weights_
from ltx2_core.model.text import PromptEncoder, PromptTokenizer, TextProjection
from ltx2_core.model.text import gemma3 as gemma_lm
from ltx2_core.model.text.config import TextConfig

# a Gemma 3 text model at toy size (the other settings are Gemma 3 12B's), and text to train its tokenizer on
DEMO_GEMMA = {"vocab_size": 384, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "query_pre_attn_scalar": 16}
_DEMO_CORPUS = (
    "A cat walks along the beach at sunset while waves roll in and gulls call overhead.",
    "blurry, low quality, distorted, watermark, static, jittery motion, bad anatomy, noise",
    "A red car drives through a rainy city at night; neon lights reflect on the wet street.",
)


def sentencepiece_model(corpus: tuple[str, ...] | list[str], vocab_size: int) -> bytes:
    """A serialized SentencePiece BPE model trained on `corpus`, with Gemma's special ids (pad 0, eos 1, bos 2,
    unk 3) and byte fallback, like the model ComfyUI embeds as `spiece_model`."""
    import io

    import sentencepiece

    buffer = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(list(corpus) * 8), model_writer=buffer, vocab_size=vocab_size, model_type="bpe",
        byte_fallback=True, character_coverage=1.0, add_dummy_prefix=False, minloglevel=2, num_threads=1,
        pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>",
        unk_piece="<unk>")
    return buffer.getvalue()


def demo_tokenizer(max_length: int = 128) -> PromptTokenizer:
    model = sentencepiece_model(_DEMO_CORPUS, DEMO_GEMMA["vocab_size"] - 64)
    return PromptTokenizer.from_sentencepiece(model, "demo tokenizer", max_length=max_length)


def demo_prompt_encoder(config: TransformerConfig | None = None, seed: int = 0, max_length: int = 128
                        ) -> PromptEncoder:
    """Tiny random-weight Gemma 3 + text projection fitting `demo_transformer(config)`; prompts padded to
    `max_length` tokens (1024 in real runs)."""
    config = config or TransformerConfig.tiny()
    gemma = gemma_lm.build_on_meta(gemma_lm.text_config({**gemma_lm.GEMMA3_12B_TEXT, **DEMO_GEMMA}))
    random_weights_(gemma, seed, std=0.05)
    gemma_lm.materialize_buffers(gemma, "cpu")
    with torch.device("meta"):
        projection = TextProjection(TextConfig.tiny(config), DEMO_GEMMA["hidden_size"],
                                    DEMO_GEMMA["num_hidden_layers"] + 1)
    random_weights_(projection, seed + 1, std=0.05)
    return PromptEncoder(demo_tokenizer(max_length), gemma, projection.eval())
