"""A tiny LTX-2.5 text encoder file in the released layout (`text_encoders/gemma4-12b-with-proj-ltx-2.5-bf16.
safetensors`, as ltx-core 1.2.0's `build_text_encoder_tensors_from_gemma_root` writes it), built inside the tests:

* metadata `format` and `gemma_config` (a `gemma4_unified` config.json whose `gemma_version` is the one the tiny 2.5
  transformer file names);
* tokenizer.json of a small BPE trained here with `tokenizers` (Gemma's special ids: pad 0, eos 1, bos 2, unk 3, no
  post-processor: Gemma 4 adds no BOS itself) as the uint8 tensor `tokenizer_json`, and `hf_asset__tokenizer_config.
  json` / `hf_asset__processor_config.json`;
* the Gemma 4 language model at toy size with random weights (norms and `layer_scalar` far from 1) under flat
  `model.*` keys, vision-tower tensors that must be ignored, and the 2.3-style text projection
  (`text_embedding_projection.{video,audio}_aggregate_embed.*`) sized for the tiny 2.5 transformer's connectors.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from ltx2_core import TransformerConfig
from ltx2_core.demo.text import bpe_tokenizer_json
from ltx2_core.model.text.config import TextConfig
from support.configs import GEMMA_SOURCE_2_5
from support.gemma import CORPUS

FILE_NAME = "gemma4-12b-with-proj-ltx-2.5-bf16.safetensors"
TOKENIZER_VOCAB = 300
# ≥ 6 layers so sliding and full layers both appear (layers 5 and 6 are full), a window shorter than the prompts,
# full layers with their own head size (as the 12B's 512 vs 256)
TINY_GEMMA4_TEXT = {
    "vocab_size": 320, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 7,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "global_head_dim": 16, "sliding_window": 6,
    "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6, "pad_token_id": 0, "eos_token_id": 1,
    "bos_token_id": 2, "use_bidirectional_attention": "vision",
    "layer_types": ["sliding_attention"] * 5 + ["full_attention"] * 2,
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                           "rope_theta": 1_000_000.0}},
}
TINY_GEMMA4_STATES = TINY_GEMMA4_TEXT["num_hidden_layers"] + 1
TOKENIZER_CONFIG = {"tokenizer_class": "GemmaTokenizer", "bos_token": "<bos>", "eos_token": "<eos>",
                    "pad_token": "<pad>", "unk_token": "<unk>", "padding_side": "left", "model_max_length": 1024}


def gemma4_config(gemma_version: str | None = GEMMA_SOURCE_2_5["gemma_version"], **text) -> dict:
    """The multimodal config.json the file's `gemma_config` holds (no vision/audio towers: not needed to encode)."""
    config = {"architectures": ["Gemma4UnifiedForConditionalGeneration"], "model_type": "gemma4_unified",
              "text_config": {"model_type": "gemma4_unified_text", **TINY_GEMMA4_TEXT, **text},
              "vision_config": None, "audio_config": None}
    if gemma_version is not None:
        config["gemma_version"] = gemma_version
    return config


@functools.lru_cache(maxsize=1)
def tokenizer_json() -> bytes:
    """tokenizer.json of a BPE trained on the test corpus, Gemma's special ids first."""
    return bpe_tokenizer_json(CORPUS, TOKENIZER_VOCAB)


@functools.lru_cache(maxsize=2)
def gemma4_state(seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights of the tiny Gemma 4 text model under its file names (`embed_tokens.weight`, `layers.N.…`)."""
    from ltx2_core.model.text.gemma4 import GEMMA4

    model = GEMMA4.build(GEMMA4.text_values(gemma4_config(), "test"))
    generator = torch.Generator().manual_seed(seed)
    state = {}
    for key, value in model.state_dict().items():
        noise = torch.randn(value.shape, generator=generator)
        if key.endswith(("norm.weight", "layer_scalar")):  # far from 1: a missed scale shows
            state[key] = 1 + 0.3 * noise
        else:
            state[key] = 0.3 * noise
    return state


def projection_tensors(seed: int = 1) -> dict[str, torch.Tensor]:
    """`text_embedding_projection.*` of the 2.3 feature extractor, fitting the tiny 2.5 transformer's connectors."""
    text = TextConfig.tiny(TransformerConfig.tiny("2.5"))
    features = TINY_GEMMA4_TEXT["hidden_size"] * TINY_GEMMA4_STATES
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for side, connector in (("video", text.video), ("audio", text.audio)):
        prefix = f"text_embedding_projection.{side}_aggregate_embed."
        tensors[prefix + "weight"] = torch.randn(connector.width, features, generator=generator) / features**0.5
        tensors[prefix + "bias"] = torch.randn(connector.width, generator=generator)
    return tensors


def _uint8(data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)


def padded_tokenizer_json() -> bytes:
    """The test tokenizer.json with a padding section (transformers then takes its pad token from there)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json().decode())
    tokenizer.enable_padding(pad_id=0, pad_token="<pad>", direction="right")
    return tokenizer.to_str().encode()


def write_gemma4_file(path: Path, *, config: dict | None = None, metadata: dict[str, str] | None = None,
                      tokenizer_config: dict | None = None, tokenizer: bytes | None = None,
                      drop: tuple[str, ...] = (), dtype: torch.dtype = torch.float32,
                      state: dict[str, torch.Tensor] | None = None) -> Path:
    """Writes the tiny 2.5 text encoder file; `drop` leaves out tensors by name (bad-file tests), `metadata` replaces
    the header's (None: the released entries); `state`: the text model's weights (None: `gemma4_state()`)."""
    tensors = {"model." + k: v.to(dtype).contiguous() for k, v in (state or gemma4_state()).items()}
    tensors |= {"vision_model.patch_embedding.weight": torch.zeros(4, 3, 2, 2),
                "multi_modal_projector.embedding_projection.weight": torch.zeros(TINY_GEMMA4_TEXT["hidden_size"], 4)}
    tensors |= projection_tensors()
    tensors["tokenizer_json"] = _uint8(tokenizer or tokenizer_json())
    tensors["hf_asset__tokenizer_config.json"] = _uint8(json.dumps(tokenizer_config or TOKENIZER_CONFIG).encode())
    tensors["hf_asset__processor_config.json"] = _uint8(json.dumps(
        {"processor_class": "Gemma4UnifiedProcessor"}).encode())
    for name in drop:
        tensors.pop(name)
    if metadata is None:
        metadata = {"format": "pt", "gemma_config": json.dumps(config or gemma4_config())}
    save_file(tensors, str(path), metadata=metadata)
    return path


def sources25(text_encoder: Path, transformer: Path):
    """The `Sources` of an LTX-2.5 model's text path (what `model_files.ModelFiles` builds): the projection from the
    text encoder file, the connectors and the transformer from the transformer file."""
    from ltx2_core.loader.sources import Component, Source, Sources

    return Sources.separate({
        Component.TEXT_PROJECTION: Source(Path(text_encoder), "text_embedding_projection."),
        Component.TEXT_CONNECTORS: Source(Path(transformer), "model.diffusion_model."),
        Component.TRANSFORMER: Source(Path(transformer), "model.diffusion_model."),
    })


def write_transformer25_file(path: Path, seed: int = 0) -> Path:
    """The tiny 2.5 transformer file (DiT + connectors, `gemma_source_checkpoint` naming this Gemma)."""
    from ltx2_core.demo import demo_transformer
    from support.transformer25 import write_transformer25

    config = TransformerConfig.tiny("2.5")
    return write_transformer25(path, demo_transformer(config, seed=seed).state_dict(), config)
