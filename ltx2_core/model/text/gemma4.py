"""Gemma 4's language model (`gemma4_unified`, LTX-2.5's 12B text encoder) written here, equal to the text model
of transformers' `Gemma4UnifiedForConditionalGeneration`, which ltx-core 1.2.0 runs (for text input the
multimodal wrapper and its bare text model give identical hidden states); the `TextBackbone`
(`model.text.backbone`) LTX-2.5 uses, as `GEMMA4`.

Written here rather than taken from transformers: Gemma 4 exists only in transformers 5.x (the pack runs on 4.50
too), and transformers' own buffer rebuild after a `meta` build mis-sizes the full-attention layers' RoPE when their
head size differs from the sliding layers' (the 12B case). What Gemma 4 does differently from Gemma 3 (spec §2):
* two layer types: sliding-window layers (head_dim, RoPE θ 10⁴) and full-attention layers (`global_head_dim`,
  "proportional" RoPE: only the first `partial_rotary_factor` of the frequencies rotate, the rest are zero);
* RMSNorm scales by `w` (Gemma 3: 1 + w); q and k are normed with weights, v without; attention scale 1;
* each layer's output is multiplied by its stored `layer_scalar`.
The per-layer sizes and the config rules are in `gemma4_config`; the config comes from the text encoder file's
`gemma_config` metadata (a Hugging Face config.json).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ltx2_core.errors import CheckpointError
from ltx2_core.model.text.gemma4_config import FULL, SLIDING, Gemma4Config, text_values


def _rms_norm(x: torch.Tensor, eps: float, weight: torch.Tensor | None) -> torch.Tensor:
    """Gemma 4's RMSNorm, in fp32 as transformers computes it: x·(mean(x²) + eps)^-½ (· w), back in x's dtype."""
    y = x.float()
    y = y * torch.pow(y.pow(2).mean(-1, keepdim=True) + eps, -0.5)
    if weight is not None:
        y = y * weight.float()
    return y.type_as(x)


class Norm(nn.Module):
    """RMSNorm over the last dim; `scaled` False: no weight (the values' norm)."""

    def __init__(self, dim: int, eps: float, scaled: bool = True) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim)) if scaled else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _rms_norm(x, self.eps, self.weight)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on (B, T, heads, head_dim) with cos/sin (B, T, head_dim): halves rotated (transformers' rotate_half)."""
    cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    """Grouped-query attention of one layer. x (B, T, D), RoPE (cos, sin), a bool mask (B, 1, T, T) and the K/V
    shared between layers (layer type -> (k, v), filled by "store" layers, read by "reuse" ones) -> (B, T, D)."""

    def __init__(self, config: Gemma4Config, layer: int) -> None:
        super().__init__()
        self.index, self.head_dim = layer, config.head_dims[layer]
        self.heads, self.kv_heads = config.num_attention_heads, config.kv_heads[layer]
        self.layer_type, self.kv_mode = config.layer_types[layer], config.kv_modes[layer]
        bias, width, eps = config.attention_bias, self.kv_heads * self.head_dim, config.rms_norm_eps
        self.q_proj = nn.Linear(config.hidden_size, self.heads * self.head_dim, bias=bias)
        self.q_norm = Norm(self.head_dim, eps)
        if self.kv_mode != "reuse":  # a layer reusing another's K/V has no K/V weights
            self.k_proj = nn.Linear(config.hidden_size, width, bias=bias)
            # `attention_k_eq_v` on a full-attention layer: the values are the keys' projection (normed, no weight)
            self.v_proj = None if config.k_is_v[layer] else nn.Linear(config.hidden_size, width, bias=bias)
            self.k_norm = Norm(self.head_dim, eps)
            self.v_norm = Norm(self.head_dim, eps, scaled=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, config.hidden_size, bias=bias)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor,
                shared: dict[str, tuple[torch.Tensor, torch.Tensor]], cache: dict | None = None) -> torch.Tensor:
        shape = (*x.shape[:-1], -1, self.head_dim)
        cos, sin = rope
        q = _rotate(self.q_norm(self.q_proj(x).view(shape)), cos, sin).transpose(1, 2)
        if self.kv_mode == "reuse":
            k, v = shared[self.layer_type]
        else:
            k_raw = self.k_proj(x).view(shape)
            v = self.v_norm(k_raw if self.v_proj is None else self.v_proj(x).view(shape)).transpose(1, 2)
            k = _rotate(self.k_norm(k_raw), cos, sin).transpose(1, 2)
            if cache is not None:  # decoding: this layer's earlier keys/values first (all of them; the mask windows)
                if self.index in cache:
                    k, v = torch.cat((cache[self.index][0], k), 2), torch.cat((cache[self.index][1], v), 2)
                cache[self.index] = k, v
        if self.kv_mode == "store":
            shared[self.layer_type] = k, v
        if self.kv_heads != self.heads:  # each K/V head serves heads / kv_heads query heads, in order
            k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
            v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        # scale 1 (q and k are RMS-normed); a fully masked row (a left pad's query) gives zeros, as in transformers
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0)
        return self.o_proj(out.transpose(1, 2).reshape(*x.shape[:-1], -1))


class Mlp(nn.Module):
    def __init__(self, config: Gemma4Config, layer: int) -> None:
        super().__init__()
        width = config.intermediate_sizes[layer]
        self.gate_proj = nn.Linear(config.hidden_size, width, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, width, bias=False)
        self.down_proj = nn.Linear(width, config.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class DecoderLayer(nn.Module):
    """h = x + post_attn_norm(attn(input_norm(x))); h += post_ff_norm(mlp(pre_ff_norm(h))); h · layer_scalar."""

    def __init__(self, config: Gemma4Config, layer: int) -> None:
        super().__init__()
        eps = config.rms_norm_eps
        self.self_attn = Attention(config, layer)
        self.mlp = Mlp(config, layer)
        self.input_layernorm = Norm(config.hidden_size, eps)
        self.post_attention_layernorm = Norm(config.hidden_size, eps)
        self.pre_feedforward_layernorm = Norm(config.hidden_size, eps)
        self.post_feedforward_layernorm = Norm(config.hidden_size, eps)
        self.register_buffer("layer_scalar", torch.ones(1))  # persistent: the file stores each layer's

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
                shared: dict[str, tuple[torch.Tensor, torch.Tensor]], cache: dict | None = None) -> torch.Tensor:
        h = x + self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), (cos, sin), mask, shared,
                                                             cache))
        h = h + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(h)))
        return h * self.layer_scalar


class ScaledEmbedding(nn.Embedding):
    """Token embeddings × √hidden_size (the scale rounded to the weights' dtype first, as transformers does)."""

    def __init__(self, vocab: int, dim: int) -> None:
        super().__init__(vocab, dim)
        self.register_buffer("embed_scale", torch.tensor(dim**0.5), persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return super().forward(input_ids) * self.embed_scale.to(self.weight.dtype)


class Rotary(nn.Module):
    """The inverse frequencies of each layer type (non-persistent: rebuilt from the config by `reset`)."""

    def __init__(self, config: Gemma4Config) -> None:
        super().__init__()
        self.config = config
        for layer_type in config.rope:
            self.register_buffer(f"{layer_type}_inv_freq", torch.empty(config.rope_dims[layer_type] // 2),
                                 persistent=False)

    def reset(self, device: torch.device | str) -> None:
        for layer_type, inv_freq in self.config.inverse_frequencies(device).items():
            setattr(self, f"{layer_type}_inv_freq", inv_freq)

    def forward(self, layer_type: str, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """positions (B, T) -> cos, sin (B, T, head_dim) in `dtype`."""
        inv_freq = getattr(self, f"{layer_type}_inv_freq")
        freqs = positions[..., None].float() * inv_freq.float()
        angles = torch.cat((freqs, freqs), dim=-1)
        return angles.cos().to(dtype), angles.sin().to(dtype)


class Gemma4TextModel(nn.Module):
    """Embeddings, decoder layers (`layers`, streamable one by one), final norm; `forward` returns the L = layers + 1
    hidden states (B, T, D): the scaled embeddings, each layer's output, the last after the final norm."""

    def __init__(self, config: Gemma4Config) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = ScaledEmbedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = Norm(config.hidden_size, config.rms_norm_eps)
        self.rotary_emb = Rotary(config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """input_ids, attention_mask (B, T), left padded. Positions are 0..T-1 in every row (as the reference:
        RoPE is relative, so padding only shifts them all)."""
        x = self.embed_tokens(input_ids)
        positions = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
        masks = self.config.masks(attention_mask)
        ropes = {t: self.rotary_emb(t, positions, x.dtype) for t in self.config.rope}
        states, shared = [x], {}
        for layer_type, layer in zip(self.config.layer_types, self.layers):
            x = layer(x, *ropes[layer_type], masks[layer_type], shared)
            states.append(x)
        states[-1] = self.norm(x)
        return tuple(states)

    def decode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor,
               cache: dict) -> torch.Tensor:
        """One cached forward (prompt enhancement): the new tokens input_ids (B, t) at `positions` (B, t), the mask
        (B, past + t) of everything so far; `cache` (layer -> keys, values; {} to start) is extended in place.
        Returns the last token's final hidden state (B, D). Masks as `generate` builds them: causal over the
        sequence index, never a pad key, sliding layers within the window."""
        if not self.config.causal:
            raise ValueError("this Gemma 4 config attends bidirectionally (use_bidirectional_attention='all'): it "
                             "cannot generate text; prompt enhancement needs a causal Gemma")
        x = self.embed_tokens(input_ids)
        total, new = attention_mask.shape[1], input_ids.shape[1]
        q = torch.arange(total - new, total, device=x.device)[:, None]
        k = torch.arange(total, device=x.device)[None, :]
        keys = attention_mask.bool()[:, None, None, :]
        full = keys & (k <= q)
        masks = {FULL: full, SLIDING: full & (k > q - self.config.sliding_window)}
        shared: dict = {}
        for layer_type, layer in zip(self.config.layer_types, self.layers):
            cos, sin = self.rotary_emb(layer_type, positions, x.dtype)
            x = layer(x, cos, sin, masks[layer_type], shared, cache)
        return self.norm(x[:, -1])


_LAYER = re.compile(r"^layers\.(\d+)\.")


class Gemma4:
    """Gemma 4 (`gemma4_unified`) as a `TextBackbone`."""

    name = "Gemma 4"
    model_types = ("gemma4_unified", "gemma4_unified_text")

    def text_values(self, raw: Mapping[str, Any], where: str) -> dict[str, Any]:
        return text_values(raw, where)

    def recognizes(self, keys: Collection[str]) -> bool:
        return "layers.0.layer_scalar" in keys

    def values_from_shapes(self, shapes: Mapping[str, Sequence[int]], where: str) -> dict[str, Any]:
        """Gemma 4's layer types, head sizes and RoPE cannot be read off shapes: the file must carry its config."""
        raise CheckpointError(f"{where}: a Gemma 4 text encoder without the 'gemma_config' metadata (the JSON of its "
                              "Hugging Face config.json); the released gemma4-12b-with-proj-ltx-2.5-bf16.safetensors "
                              "carries it: download that file again")

    def build(self, values: Mapping[str, Any]) -> nn.Module:
        with torch.device("meta"):
            model = Gemma4TextModel(Gemma4Config.from_values(values))
        return model.eval().requires_grad_(False)

    def materialize_buffers(self, model: nn.Module, device: torch.device | str, partial: bool = False) -> None:
        model.rotary_emb.reset(device)
        model.embed_tokens.embed_scale = torch.tensor(model.config.hidden_size**0.5, device=device)
        left = [name for name, t in (*model.named_parameters(), *model.named_buffers()) if t.is_meta]
        if left and not partial:
            raise RuntimeError(f"Gemma 4 tensors left unloaded after materialisation: {left[:5]}")

    def hidden_states(self, model: nn.Module, input_ids: torch.Tensor,
                      attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return model(input_ids, attention_mask)

    def new_cache(self, model: nn.Module) -> dict:
        return {}

    def decode(self, model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, positions: torch.Tensor,
               cache: dict, embeds: torch.Tensor | None = None) -> torch.Tensor:
        if embeds is not None:
            raise ValueError("Gemma 4 decodes from token ids only (no image path)")
        return model.decode(input_ids, attention_mask, positions, cache)

    def final_softcap(self, model: nn.Module) -> float | None:
        return model.config.final_logit_softcapping


GEMMA4 = Gemma4()
