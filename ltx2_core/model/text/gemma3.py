"""Gemma 3's language model from `transformers` (spec §2), built on `meta` and filled with `assign=True`; the
`TextBackbone` (`model.text.backbone`) LTX-2.0 and 2.3 use, as `GEMMA3`.

Only `Gemma3TextModel` is built: no vision tower, no multimodal projector, no `lm_head` (24 GB of bf16 weights
for the 12B text model alone, so nothing else is allocated). Encoding returns the hidden states of every layer,
which is all the LTX-2 text path uses; prompt enhancement (`model.text.enhance`) decodes with transformers' KV cache
on the same model, its logits from the tied embeddings.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from ltx2_core.errors import CheckpointError

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


def materialize_buffers(model: nn.Module, device: torch.device | str, partial: bool = False) -> None:
    """(Re)computes the non-persistent buffers (RoPE inverse frequencies, embedding scale) on `device`: a meta build
    leaves them empty and checkpoints do not store them, they are derived from the config. `partial`: weights left
    on `meta` are expected (a pipeline rank's part, `loader.text_parts`)."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child).__name__.endswith("RotaryEmbedding"):
                setattr(parent, name, type(child)(config=child.config, device=device))
    embed = model.embed_tokens
    if isinstance(getattr(embed, "embed_scale", None), torch.Tensor):
        scale = getattr(embed, "scalar_embed_scale", model.config.hidden_size**0.5)
        embed.embed_scale = torch.tensor(scale, device=device)
    left = [name for name, t in (*model.named_parameters(), *model.named_buffers()) if t.is_meta]
    if left and not partial:
        raise RuntimeError(f"Gemma tensors left unloaded after materialisation: {left[:5]}")


def hidden_states(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """One forward; returns the L = layers + 1 hidden states (B, T, D): scaled embeddings, each layer's output, the
    last one after the final norm (transformers' `output_hidden_states` convention, as the reference uses)."""
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True, use_cache=False)
    return tuple(out.hidden_states)


def new_cache(model: nn.Module):
    """An empty transformers `DynamicCache` for `model` (sliding layers keep their window, as `generate` builds it)."""
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:  # transformers 4.x: no config argument
        return DynamicCache()


def decode(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor,
           cache, embeds: torch.Tensor | None = None) -> torch.Tensor:
    """One cached forward as `generate` runs it: the new tokens input_ids (B, t) at `positions` (B, t), the mask
    (B, past + t) of everything so far, the cache extended in place; returns the last token's final hidden state
    (B, D). `embeds`: the input embeddings in place of the ids' (an image's features at its tokens)."""
    name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"  # 5.x / 4.x
    inputs = {"input_ids": input_ids} if embeds is None else {"inputs_embeds": embeds}
    out = model(**inputs, attention_mask=attention_mask, position_ids=positions, use_cache=True, **{name: cache})
    return out.last_hidden_state[:, -1]


_LAYER = re.compile(r"^layers\.(\d+)\.")
# weights only Gemma 3 has among the decoders users confuse it with (Gemma 1/2 and Llama lack q/k norms and the
# pre-feed-forward norm)
_SIGNATURE = ("layers.0.self_attn.q_norm.weight", "layers.0.pre_feedforward_layernorm.weight")


class Gemma3:
    """Gemma 3 as a `TextBackbone`: the module's functions behind the seam, plus its config rules."""

    name = "Gemma 3"
    model_types = ("gemma3", "gemma3_text")

    def text_values(self, raw: Mapping[str, Any], where: str) -> dict[str, Any]:
        """A Hugging Face config.json (the multimodal `gemma3` or the text-only `gemma3_text`) as text settings,
        over Gemma 3 12B's defaults."""
        values = raw.get("text_config", raw) if raw.get("model_type") == "gemma3" else raw
        if values.get("model_type", "gemma3_text") != "gemma3_text":
            raise CheckpointError(f"{where}: model_type {raw.get('model_type')!r} is not Gemma 3 "
                                  "(expected 'gemma3' or 'gemma3_text'); LTX-2 needs Gemma 3 12B")
        defaults = dict(GEMMA3_12B_TEXT)
        if "rope_parameters" in values:  # transformers 5 layout: the legacy rope keys must not be merged over it
            for key in ("rope_theta", "rope_local_base_freq", "rope_scaling"):
                defaults.pop(key)
        return {**defaults, **values, "model_type": "gemma3_text"}

    def recognizes(self, keys: Collection[str]) -> bool:
        # Gemma 4 has the same weights plus each layer's `layer_scalar`
        return all(name in keys for name in _SIGNATURE) and "layers.0.layer_scalar" not in keys

    def values_from_shapes(self, shapes: Mapping[str, Sequence[int]], where: str) -> dict[str, Any]:
        """Gemma 3 12B's settings with every size read from the weight shapes (ComfyUI's file has no config)."""
        if not self.recognizes(shapes):
            raise CheckpointError(f"{where}: a decoder without Gemma 3's q/k norms and four layer norms (Gemma 1/2 "
                                  "or Llama?); LTX-2 needs Gemma 3 12B (gemma_3_12B_it*.safetensors)")
        vocab, hidden = shapes["embed_tokens.weight"]
        head_dim = shapes["layers.0.self_attn.q_norm.weight"][0]
        config = dict(GEMMA3_12B_TEXT)
        config.update(
            vocab_size=vocab,
            hidden_size=hidden,
            intermediate_size=shapes["layers.0.mlp.gate_proj.weight"][0],
            num_hidden_layers=1 + max(int(m.group(1)) for key in shapes if (m := _LAYER.match(key))),
            num_attention_heads=shapes["layers.0.self_attn.q_proj.weight"][0] // head_dim,
            num_key_value_heads=shapes["layers.0.self_attn.k_proj.weight"][0] // head_dim,
            head_dim=head_dim,
            query_pre_attn_scalar=head_dim,  # Gemma 3 12B: 256 = head_dim
        )
        return config

    def build(self, values: Mapping[str, Any]) -> nn.Module:
        return build_on_meta(text_config(values))

    def materialize_buffers(self, model: nn.Module, device: torch.device | str, partial: bool = False) -> None:
        materialize_buffers(model, device, partial)

    def hidden_states(self, model: nn.Module, input_ids: torch.Tensor,
                      attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return hidden_states(model, input_ids, attention_mask)

    def new_cache(self, model: nn.Module):
        return new_cache(model)

    def decode(self, model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor,
               cache, embeds: torch.Tensor | None = None) -> torch.Tensor:
        return decode(model, input_ids, attention_mask, positions, cache, embeds)

    def final_softcap(self, model: nn.Module) -> float | None:
        return getattr(model.config, "final_logit_softcapping", None)


GEMMA3 = Gemma3()
