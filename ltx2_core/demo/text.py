"""The demo's text path: a tiny random-weight Gemma 3 with a SentencePiece tokenizer trained in code (LTX-2.0 and
2.3), or a tiny random-weight Gemma 4 with a BPE tokenizer.json trained in code (LTX-2.5), and the text projection
that fits the demo transformer."""

from __future__ import annotations

import torch

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.demo.transformer import random_weights_
from ltx2_core.model.text import PromptEncoder, PromptTokenizer, TextProjection
from ltx2_core.model.text import gemma3 as gemma_lm
from ltx2_core.model.text.config import TextConfig
from ltx2_core.model.text.gemma4 import GEMMA4
from ltx2_core.releases import ModelVersion

# a Gemma 3 text model at toy size (the other settings are Gemma 3 12B's), and text to train its tokenizer on
DEMO_GEMMA = {"vocab_size": 384, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "query_pre_attn_scalar": 16}
# LTX-2.5's Gemma 4 at toy size: five sliding-window layers (window shorter than the demo prompts) and a full-attention
# one with its own head size, as the 12B
DEMO_GEMMA4 = {"model_type": "gemma4_unified_text", "vocab_size": 384, "hidden_size": 32, "intermediate_size": 64,
               "num_hidden_layers": 6, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16,
               "global_head_dim": 32, "sliding_window": 64}
DEMO_TOKENIZER_CONFIG = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"}
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


def bpe_tokenizer_json(corpus: tuple[str, ...] | list[str], vocab_size: int) -> bytes:
    """tokenizer.json of a BPE trained on `corpus` with `tokenizers`, Gemma's special ids (pad 0, eos 1, bos 2, unk 3)
    and no post-processor (Gemma 4's tokenizer adds no BOS itself), like the bytes LTX-2.5's text encoder embeds."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  special_tokens=["<pad>", "<eos>", "<bos>", "<unk>"])
    tokenizer.train_from_iterator(list(corpus) * 4, trainer)
    return tokenizer.to_str().encode()


def demo_tokenizer(max_length: int = 128) -> PromptTokenizer:
    model = sentencepiece_model(_DEMO_CORPUS, DEMO_GEMMA["vocab_size"] - 64)
    return PromptTokenizer.from_sentencepiece(model, "demo tokenizer", max_length=max_length)


def demo_prompt_encoder(config: TransformerConfig | None = None, seed: int = 0, max_length: int = 128
                        ) -> PromptEncoder:
    """Tiny random-weight Gemma (3, or 4 for an LTX-2.5 `config`) + text projection fitting
    `demo_transformer(config)`; prompts padded to `max_length` tokens (1024 in real runs)."""
    config = config or TransformerConfig.tiny()
    if config.version is ModelVersion.V2_5:
        gemma, tokenizer, sizes = _demo_gemma4(seed), _demo_tokenizer4(max_length), DEMO_GEMMA4
    else:
        gemma = gemma_lm.build_on_meta(gemma_lm.text_config({**gemma_lm.GEMMA3_12B_TEXT, **DEMO_GEMMA}))
        random_weights_(gemma, seed, std=0.05)
        gemma_lm.materialize_buffers(gemma, "cpu")
        tokenizer, sizes = demo_tokenizer(max_length), DEMO_GEMMA
    with torch.device("meta"):
        projection = TextProjection(TextConfig.tiny(config), sizes["hidden_size"], sizes["num_hidden_layers"] + 1)
    random_weights_(projection, seed + 1, std=0.05)
    return PromptEncoder(tokenizer, gemma, projection.eval())


def _demo_gemma4(seed: int) -> torch.nn.Module:
    gemma = GEMMA4.build(GEMMA4.text_values(DEMO_GEMMA4, "demo Gemma 4"))
    random_weights_(gemma, seed, std=0.05)
    with torch.no_grad():
        for name, param in gemma.named_parameters():
            if name.endswith("norm.weight"):  # Gemma 4's norms scale by w (not 1 + w): keep them near 1
                param.add_(1.0)
        for layer in gemma.layers:
            layer.layer_scalar = torch.ones(1)
    GEMMA4.materialize_buffers(gemma, "cpu")
    return gemma


def _demo_tokenizer4(max_length: int) -> PromptTokenizer:
    data = bpe_tokenizer_json(_DEMO_CORPUS, DEMO_GEMMA4["vocab_size"] - 64)
    return PromptTokenizer.from_tokenizer_json(data, DEMO_TOKENIZER_CONFIG, "demo tokenizer", max_length=max_length)
