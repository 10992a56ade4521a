"""Gemma 3's language model from `transformers` (spec §2), built on `meta` and filled with `assign=True`.

Only `Gemma3TextModel` is built: no vision tower, no multimodal projector, no `lm_head` (24 GB of bf16 weights
for the 12B text model alone, so nothing else is allocated). Encoding returns the hidden states of every layer,
which is all the LTX-2 text path uses.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

# Gemma 3 12B's text settings that weight shapes cannot tell (ComfyUI's single file carries no config).
GEMMA3_12B_TEXT: dict[str, Any] = {
    "model_type": "gemma3_text",
    "vocab_size": 262208,
    "hidden_size": 3840,
    "intermediate_size": 15360,
    "num_hidden_layers": 48,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 256,
    "query_pre_attn_scalar": 256,
    "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1_000_000.0,
    "rope_local_base_freq": 10_000.0,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    "sliding_window": 1024,
    "sliding_window_pattern": 6,
    "attention_bias": False,
    "attn_logit_softcapping": None,
    "final_logit_softcapping": None,
    "pad_token_id": 0,
    "eos_token_id": 1,
    "bos_token_id": 2,
}


def text_config(values: Mapping[str, Any]):
    """A `transformers.Gemma3TextConfig` from a config dict (legacy `rope_scaling`/`rope_local_base_freq` keys work
    with transformers 4.x and 5.x), using PyTorch's SDPA attention."""
    from transformers import Gemma3TextConfig

    values = {k: v for k, v in values.items() if k not in ("architectures", "torch_dtype", "dtype")}
    if "rope_parameters" in values and "rope_parameters" not in inspect.signature(Gemma3TextConfig).parameters:
        values = _legacy_rope(values)  # a folder saved by transformers 5 read by 4.x, which ignores rope_parameters
    config = Gemma3TextConfig(**values)
    config._attn_implementation = "sdpa"
    return config


def _legacy_rope(values: Mapping[str, Any]) -> dict[str, Any]:
    """transformers 5's per-layer-type `rope_parameters` as the legacy keys that transformers 4.x reads."""
    values = dict(values)
    rope = values.pop("rope_parameters") or {}
    if "full_attention" in rope:  # per layer type; a flat dict applies to the global layers only
        full, local = rope["full_attention"] or {}, rope.get("sliding_attention") or {}
    else:
        full, local = rope, {}
    if "rope_theta" in full:
        values["rope_theta"] = full["rope_theta"]
    if "rope_theta" in local:
        values["rope_local_base_freq"] = local["rope_theta"]
    scaling = {k: v for k, v in full.items() if k != "rope_theta"}
    values["rope_scaling"] = None if scaling.get("rope_type", "default") == "default" else scaling
    return values


def build_on_meta(config) -> nn.Module:
    """`Gemma3TextModel` with every tensor on `meta` (no memory, no random init)."""
    from transformers import Gemma3TextModel

    with torch.device("meta"):
        model = Gemma3TextModel(config)
    return model.eval().requires_grad_(False)


def materialize_buffers(model: nn.Module, device: torch.device | str) -> None:
    """(Re)computes the non-persistent buffers (RoPE inverse frequencies, embedding scale) on `device`: a meta build
    leaves them empty and checkpoints do not store them, they are derived from the config."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child).__name__.endswith("RotaryEmbedding"):
                setattr(parent, name, type(child)(config=child.config, device=device))
    embed = model.embed_tokens
    if isinstance(getattr(embed, "embed_scale", None), torch.Tensor):
        scale = getattr(embed, "scalar_embed_scale", model.config.hidden_size**0.5)
        embed.embed_scale = torch.tensor(scale, device=device)
    left = [name for name, t in (*model.named_parameters(), *model.named_buffers()) if t.is_meta]
    if left:
        raise RuntimeError(f"Gemma tensors left unloaded after materialisation: {left[:5]}")


def hidden_states(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """One forward; returns the L = layers + 1 hidden states (B, T, D): scaled embeddings, each layer's output, the
    last one after the final norm (transformers' `output_hidden_states` convention, as the reference uses)."""
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True, use_cache=False)
    return tuple(out.hidden_states)
