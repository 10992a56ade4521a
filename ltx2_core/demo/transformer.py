"""The built-in tiny random-weight demo model, and inputs of the shapes a real run uses."""

from __future__ import annotations

import torch
from torch import nn

from ltx2_core.config import TransformerConfig
from ltx2_core.loader.lora import Lora, LoraPair
from ltx2_core.latents import audio_latent_length, audio_positions, check_video_size, video_positions
from ltx2_core.model.text import PromptEncoder, PromptTokenizer, TextProjection
from ltx2_core.model.text import gemma as gemma_lm
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.text_config import TextConfig
from ltx2_core.types import RunConstants, StreamInput, TextEmbeddings


def random_weights_(module: nn.Module, seed: int = 0, std: float = 0.2) -> nn.Module:
    """Fills every parameter with seeded N(0, std²) values in place (materializing `meta` tensors first)."""
    if any(t.is_meta for t in module.parameters()):
        module.to_empty(device="cpu")
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in module.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * std)
    return module


def demo_transformer(config: TransformerConfig | None = None, seed: int = 0) -> LTX2Transformer:
    """The tiny random-weight transformer (LTX-2.0 structure unless a config is given), in eval mode on the CPU."""
    config = config or TransformerConfig.tiny()
    with torch.device("meta"):
        model = LTX2Transformer(config)
    return random_weights_(model, seed).eval()


def demo_lora(model: nn.Module, rank: int = 4, seed: int = 0, std: float = 0.05, name: str = "demo LoRA") -> Lora:
    """A random LoRA on every linear weight of the transformer blocks (the layout of LTX-2's distilled LoRA)."""
    generator = torch.Generator().manual_seed(seed)
    pairs = {}
    for target, weight in model.named_parameters():
        if target.startswith("transformer_blocks.") and target.endswith(".weight") and weight.dim() == 2:
            rows, cols = weight.shape
            pairs[target] = LoraPair(torch.randn(rank, cols, generator=generator) * std,
                                     torch.randn(rows, rank, generator=generator) * std, 1.0)
    return Lora(name, pairs)


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


def demo_inputs(
    model: LTX2Transformer,
    *,
    pixel_frames: int = 17,
    height: int = 64,
    width: int = 96,
    fps: float = 24.0,
    sigma: float = 0.7,
    text_tokens: int = 128,
    text: TextEmbeddings | None = None,
    seed: int = 0,
) -> tuple[StreamInput, StreamInput, RunConstants]:
    """Random latents for a clip of `pixel_frames` (8k+1) at height×width pixels, one sample per prompt of `text`
    (encoded prompts), or one sample with random text contexts of `text_tokens` tokens."""
    check_video_size(pixel_frames, height, width)
    cfg = model.config
    param = next(model.parameters())
    device, dtype = param.device, param.dtype
    generator = torch.Generator().manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=generator).to(device=device, dtype=dtype)

    frames, rows, cols = (pixel_frames - 1) // 8 + 1, height // 32, width // 32
    audio_tokens = audio_latent_length(pixel_frames, fps)
    caption = cfg.caption_channels
    if text is None:
        text = TextEmbeddings(randn(1, text_tokens, caption or cfg.video.context_dim),
                              randn(1, text_tokens, caption or cfg.audio.context_dim))
    batch = text.video.shape[0]
    run = model.prepare_run(
        video_positions(frames, rows, cols, fps, device=device),
        audio_positions(audio_tokens, device=device),
        text.video.to(device=device, dtype=dtype),
        text.audio.to(device=device, dtype=dtype),
    )
    sigmas = torch.full((batch,), sigma, device=device, dtype=torch.float32)
    video = StreamInput(randn(1, frames * rows * cols, cfg.video.in_channels).expand(batch, -1, -1), sigmas,
                        sigmas[:, None])
    audio = StreamInput(randn(1, audio_tokens, cfg.audio.in_channels).expand(batch, -1, -1), sigmas, sigmas[:, None])
    return video, audio, run
