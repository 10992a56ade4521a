"""Gemma 4's text settings (`gemma4_unified`) from a Hugging Face config.json, with transformers 5's defaults and
per-layer rules, and what they derive: per-layer head sizes, the RoPE inverse frequencies of each layer type, the
attention masks of each layer type.

The released text encoder stores its config.json as the `gemma_config` metadata: the multimodal `gemma4_unified`
config (its `text_config` is what the text model reads; `gemma_version` at the top names the checkpoint, which the
LTX-2.5 transformer file must name too) or a text-only `gemma4_unified_text` one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ltx2_core.errors import CheckpointError

# transformers 5.23's Gemma4UnifiedTextConfig defaults (the 12B file states its own values)
DEFAULTS: dict[str, Any] = {
    "vocab_size": 262_144, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 30,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "global_head_dim": 512,
    "num_global_key_value_heads": None, "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6,
    "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2, "attention_bias": False, "sliding_window": 1024,
    "layer_types": None, "use_bidirectional_attention": "vision", "attention_k_eq_v": False,
    "num_kv_shared_layers": 0, "use_double_wide_mlp": False, "final_logit_softcapping": None,
    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                           "rope_theta": 1_000_000.0}},
}
SLIDING, FULL = "sliding_attention", "full_attention"
_ROPE_TYPES = ("default", "proportional")


def text_values(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The text model's values of a `gemma4_unified` (or `gemma4_unified_text`) config.json, defaults filled in;
    `gemma_version` kept from the top level. CheckpointError for another family or what this model does not run."""
    model_type = raw.get("model_type")
    if model_type == "gemma4_unified":
        values = raw.get("text_config") or {}
    elif model_type == "gemma4_unified_text":
        values = raw
    else:
        raise CheckpointError(f"{where}: model_type {model_type!r} is not Gemma 4 unified (expected "
                              "'gemma4_unified'); LTX-2.5 needs its Gemma 4 12B text encoder")
    known = {k: values[k] for k in (*DEFAULTS, "per_layer_config") if k in values}
    merged = {**DEFAULTS, **known, "model_type": "gemma4_unified_text", "gemma_version": raw.get("gemma_version")}
    problems = []
    if merged["hidden_activation"] not in ("gelu_pytorch_tanh", "gelu_tanh"):
        problems.append(f"hidden_activation={merged['hidden_activation']!r} (supported: 'gelu_pytorch_tanh')")
    if merged["use_bidirectional_attention"] not in ("vision", "all", None):
        problems.append(f"use_bidirectional_attention={merged['use_bidirectional_attention']!r}")
    for layer_type, rope in (merged["rope_parameters"] or {}).items():
        if rope is not None and rope.get("rope_type", "default") not in _ROPE_TYPES:
            problems.append(f"rope_parameters.{layer_type}.rope_type={rope.get('rope_type')!r} "
                            f"(supported: {', '.join(_ROPE_TYPES)})")
    if problems:
        raise CheckpointError(f"{where}: unsupported Gemma 4 config: " + "; ".join(problems))
    return merged


@dataclass(frozen=True)
class Gemma4Config:
    """The text model's structure, resolved per layer."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    layer_types: tuple[str, ...]
    head_dims: tuple[int, ...]  # per layer: head_dim on sliding layers, global_head_dim on full ones
    kv_heads: tuple[int, ...]
    k_is_v: tuple[bool, ...]  # per layer: the values reuse the keys' projection (attention_k_eq_v, full layers)
    kv_modes: tuple[str | None, ...]  # per layer: "reuse" another layer's K/V, "store" them for those, or None
    intermediate_sizes: tuple[int, ...]  # per layer (doubled on K/V-reusing layers with `use_double_wide_mlp`)
    rope: Mapping[str, Mapping[str, Any]]  # layer type -> rope parameters
    rms_norm_eps: float
    sliding_window: int  # as the masks use it (already halved + 1 for bidirectional attention)
    causal: bool
    attention_bias: bool
    final_logit_softcapping: float | None = None  # the logits' tanh cap when generating (prompt enhancement)
    model_type: str = "gemma4_unified_text"

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> Gemma4Config:
        """From `text_values`' dict (per-layer overrides as transformers 5 resolves them)."""
        layers = int(values["num_hidden_layers"])
        layer_types = list(values["layer_types"] or [SLIDING if (i + 1) % 6 else FULL for i in range(layers)])
        layer_types[-1] = FULL  # transformers forces the last layer to full attention
        per_layer = values.get("per_layer_config")
        if per_layer is None:  # a config.json as Google writes it: the full layers' sizes as global values
            overrides: dict[str, Any] = {"head_dim": values["global_head_dim"]}
            if values["attention_k_eq_v"] and values["num_global_key_value_heads"] is not None:
                overrides["num_key_value_heads"] = values["num_global_key_value_heads"]
            per_layer = {str(i): overrides for i, t in enumerate(layer_types) if t == FULL}
        per_layer = {str(k): v for k, v in per_layer.items()}
        head_dims = tuple(int(per_layer.get(str(i), {}).get("head_dim", values["head_dim"])) for i in range(layers))
        kv_heads = tuple(int(per_layer.get(str(i), {}).get("num_key_value_heads", values["num_key_value_heads"]))
                         for i in range(layers))
        kv_modes = _kv_modes(layer_types, int(values["num_kv_shared_layers"]))
        wide = 2 if values["use_double_wide_mlp"] else 1
        bidirectional = values["use_bidirectional_attention"] == "all"
        window = int(values["sliding_window"])
        return cls(
            vocab_size=int(values["vocab_size"]), hidden_size=int(values["hidden_size"]),
            intermediate_size=int(values["intermediate_size"]), num_hidden_layers=layers,
            num_attention_heads=int(values["num_attention_heads"]), layer_types=tuple(layer_types),
            head_dims=head_dims, kv_heads=kv_heads,
            k_is_v=tuple(bool(values["attention_k_eq_v"]) and t == FULL for t in layer_types),
            kv_modes=kv_modes,
            intermediate_sizes=tuple(int(values["intermediate_size"]) * (wide if mode == "reuse" else 1)
                                     for mode in kv_modes),
            rope={t: dict(values["rope_parameters"][t]) for t in sorted(set(layer_types))},
            rms_norm_eps=float(values["rms_norm_eps"]),
            sliding_window=window // 2 + 1 if bidirectional else window,
            causal=not bidirectional, attention_bias=bool(values["attention_bias"]),
            final_logit_softcapping=values.get("final_logit_softcapping"),
        )

    @property
    def rope_dims(self) -> dict[str, int]:
        """Layer type -> the head size its RoPE spans."""
        return {t: self.head_dims[self.layer_types.index(t)] for t in self.rope}

    def inverse_frequencies(self, device: torch.device | str) -> dict[str, torch.Tensor]:
        """Layer type -> inverse frequencies (head_dim / 2,) fp32, computed as transformers does: "default" =
        1/θ^(2i/d); "proportional" = the first ⌊factor·d/2⌋ of those (d = the full head size), zeros after them
        (those dims do not rotate), divided by `factor` (1)."""
        out = {}
        for layer_type, rope in self.rope.items():
            dim = self.rope_dims[layer_type]
            theta = rope["rope_theta"]
            if rope.get("rope_type", "default") == "proportional":
                angles = int(rope.get("partial_rotary_factor", 1.0) * dim // 2)
                steps = torch.arange(0, 2 * angles, 2, dtype=torch.int64).to(device=device, dtype=torch.float)
                inv_freq = torch.cat((1.0 / (theta ** (steps / dim)),
                                      torch.zeros(dim // 2 - angles, dtype=torch.float32, device=device)))
                inv_freq = inv_freq / rope.get("factor", 1.0)
            else:
                inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)).to(device)
            out[layer_type] = inv_freq
        return out

    def masks(self, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        """(B, T) padding mask (1 = token) -> layer type -> bool (B, 1, T, T), True where a query may see a key:
        causal (or not, for bidirectional configs), never a pad key, sliding layers within the window."""
        tokens = attention_mask.shape[1]
        index = torch.arange(tokens, device=attention_mask.device)
        q, k = index[:, None], index[None, :]
        keys = attention_mask.bool()[:, None, None, :]
        if self.causal:
            full = k <= q
            sliding = full & (k > q - self.sliding_window)
        else:
            full = torch.ones(tokens, tokens, dtype=torch.bool, device=attention_mask.device)
            sliding = (q - k).abs() <= self.sliding_window
        masks = {FULL: keys & full, SLIDING: keys & sliding}
        return {t: masks[t] for t in self.rope}


def _kv_modes(layer_types: list[str], shared: int) -> tuple[str | None, ...]:
    """transformers' K/V sharing: the last `shared` layers reuse the K/V of the last earlier layer of their type,
    which stores them."""
    first = len(layer_types) - shared
    modes: list[str | None] = [None if i < first else "reuse" for i in range(len(layer_types))]
    if shared:
        producers = layer_types[:first]
        if set(producers) != set(layer_types):
            raise CheckpointError(f"num_kv_shared_layers={shared}: a layer type that reuses keys/values has no "
                                  "earlier layer of its type computing them")
        for layer_type in set(layer_types):
            modes[first - 1 - producers[::-1].index(layer_type)] = "store"
    return tuple(modes)
