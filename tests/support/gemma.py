"""A tiny Gemma 3 text encoder written in both layouts users have (spec §2), built inside the tests:

* a SentencePiece model trained on a few sentences, with Gemma's special-token ids (pad 0, eos 1, bos 2, unk 3);
* `transformers.Gemma3TextModel` at toy size with random weights;
* ComfyUI's single file (`model.*` keys + the tokenizer as the uint8 tensor `spiece_model` + a vision part that
  must be skipped) and a Hugging Face folder (config.json, two shards with `language_model.model.*` keys and an
  index, tokenizer.json / tokenizer_config.json).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from ltx2_core.demo import sentencepiece_model
from support.configs import TINY_GEMMA

CORPUS = [
    "A cat walks along the beach at sunset while waves roll in.",
    "A red car drives through a rainy city at night, neon lights reflecting on the wet street.",
    "blurry, low quality, distorted, watermark, static, jittery motion, bad anatomy",
    "The camera slowly pans across a quiet forest; birds sing and leaves rustle.",
    "A woman speaks to the camera: hello, welcome to the show!",
]


@functools.lru_cache(maxsize=1)
def spiece_model() -> bytes:
    """Serialized SentencePiece BPE model (byte fallback, Gemma's special ids)."""
    return sentencepiece_model(CORPUS, TINY_GEMMA["vocab_size"] - 20)


def text_config_values(hidden_size: int = TINY_GEMMA["hidden_size"]) -> dict:
    from ltx2_core.model.text.gemma3 import GEMMA3_12B_TEXT

    return {**GEMMA3_12B_TEXT, **TINY_GEMMA, "hidden_size": hidden_size}


@functools.lru_cache(maxsize=2)
def gemma_state(seed: int = 0, hidden_size: int = TINY_GEMMA["hidden_size"]) -> dict[str, torch.Tensor]:
    """Random weights of the tiny Gemma3TextModel under transformers' names (`embed_tokens.weight`, `layers.N.…`)."""
    from transformers import Gemma3TextModel

    from ltx2_core.model.text.gemma3 import text_config

    torch.manual_seed(seed)
    model = Gemma3TextModel(text_config(text_config_values(hidden_size)))
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    generator = torch.Generator().manual_seed(seed)
    for key, value in state.items():
        if key.endswith("norm.weight"):  # Gemma's norms scale by (1 + w); make them non-trivial
            state[key] = 0.1 * torch.randn(value.shape, generator=generator)
    return state


def _vision_part() -> dict[str, torch.Tensor]:
    return {"patch_embedding.weight": torch.zeros(4, 3, 2, 2), "post_layernorm.weight": torch.ones(4)}


def write_comfyui_file(path: Path, state: dict[str, torch.Tensor] | None = None, *, with_tokenizer: bool = True,
                       dtype: torch.dtype = torch.float32) -> Path:
    state = gemma_state() if state is None else state
    tensors = {"model." + k: v.to(dtype).contiguous() for k, v in state.items()}
    tensors |= {"vision_model." + k: v for k, v in _vision_part().items()}
    tensors["multi_modal_projector.mm_input_projection_weight"] = torch.zeros(4, TINY_GEMMA["hidden_size"])
    if with_tokenizer:
        tensors["spiece_model"] = torch.frombuffer(bytearray(spiece_model()), dtype=torch.uint8)
    save_file(tensors, str(path))
    return path


def write_hf_folder(folder: Path, state: dict[str, torch.Tensor] | None = None) -> Path:
    """The layout of google/gemma-3-12b-it: Gemma3ForConditionalGeneration config and sharded weights."""
    from transformers import AutoTokenizer

    state = gemma_state() if state is None else state
    folder.mkdir(parents=True, exist_ok=True)
    text = {k: v for k, v in text_config_values().items() if k != "model_type"}
    config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
              "text_config": {"model_type": "gemma3_text", **text},
              "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 4}}
    (folder / "config.json").write_text(json.dumps(config))
    keys = sorted(state)
    half = len(keys) // 2
    shards = {
        "model-00001-of-00002.safetensors": {"language_model.model." + k: state[k] for k in keys[:half]},
        "model-00002-of-00002.safetensors": {"language_model.model." + k: state[k] for k in keys[half:]}
        | {"vision_tower.vision_model." + k: v for k, v in _vision_part().items()},
    }
    weight_map = {}
    for name, tensors in shards.items():
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(folder / name))
        weight_map |= dict.fromkeys(tensors, name)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    # tokenizer.model + tokenizer_config.json; transformers converts them and writes tokenizer.json as HF ships it
    (folder / "tokenizer.model").write_bytes(spiece_model())
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "GemmaTokenizer", "add_bos_token": True, "add_eos_token": False}))
    AutoTokenizer.from_pretrained(str(folder), local_files_only=True).save_pretrained(str(folder))
    return folder
