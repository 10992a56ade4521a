"""LoRAs beside quantised weights, added after dequantisation at each call: a layer whose weight stays in its format
(GGUF blocks, int8, MXFP8, NVFP4) carries the low-rank factors of the LoRAs attached to it,

    y = base(x) + (x · Dᵀ) · Uᵀ,   D = [A₁; A₂; ...] (R, in),   U = [s₁·B₁, s₂·B₂, ...] (out, R),

s = strength · alpha / rank; the LoRAs are concatenated along the rank, so one pair of skinny matmuls serves them all.
Where the layer dequantises its weight for the call anyway and the call has more rows than in·out / (in + out) (the
FLOP crossover: out·in·R multiply-adds for U·D against rows·R·(in + out) for the activations), U·D is added to the
dequantised weight instead. The quantised bytes are never written, so attaching and detaching is exact, and a layer
with nothing attached runs its base forward (a LoRA of strength 0 attaches nothing). The factors are non-persistent
buffers (no state-dict entries; `.to()`, offloading and streaming move them with the layer) in the compute dtype;
the forward is device work only (no host read). Why per call and not requantised once per stage:
docs/small_cards/lora.md (measured by bench/quant_lora.py).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn


class LowRank(NamedTuple):
    """The factors attached to one layer: down (R, in), up (out, R) with every LoRA's strength · scale folded in."""

    down: torch.Tensor
    up: torch.Tensor


# where factors are attached: "lora" holds a load's LoRAs (`fuse_loras`, kept for the model's life: a streamer built
# afterwards streams them with their block), "stage_lora" a stage's or a run's (`fused_loras`, detached after): a
# separate slot, so detaching never touches the load's factors nor what a streamer recorded
SLOTS = ("lora", "stage_lora")


def init_low_rank(module: nn.Module) -> None:
    """Registers the (empty) factor slots of a quantised layer; called in its `__init__`."""
    for slot in SLOTS:
        module.register_buffer(f"{slot}_down", None, persistent=False)
        module.register_buffer(f"{slot}_up", None, persistent=False)


def attached(module: nn.Module, slot: str = "stage_lora") -> LowRank | None:
    """The factors `module` carries in `slot` (None: none)."""
    down = getattr(module, f"{slot}_down", None)
    return None if down is None else LowRank(down, getattr(module, f"{slot}_up"))


def set_attached(module: nn.Module, factors: LowRank | None, slot: str = "stage_lora") -> None:
    """Replaces the factors `module` carries in `slot` (None: detach them), e.g. back to those before a stage."""
    down, up = (None, None) if factors is None else factors
    setattr(module, f"{slot}_down", down)
    setattr(module, f"{slot}_up", up)


def attach(module: nn.Module, down: torch.Tensor, up: torch.Tensor, slot: str = "stage_lora") -> None:
    """Adds a low-rank update `up @ down` ((out, R), (R, in), the scale folded into `up`) beside what `module`
    carries in `slot`; new tensors, so a previous `attached(module, slot)` stays valid for `set_attached`."""
    if (up.shape[0], down.shape[1]) != (module.out_features, module.in_features) or up.shape[1] != down.shape[0]:
        raise ValueError(f"a low-rank update of up {list(up.shape)} @ down {list(down.shape)} does not fit a layer "
                         f"of {module.out_features} outputs and {module.in_features} inputs")
    now = attached(module, slot)
    if now is not None:
        down, up = torch.cat([now.down, down.to(now.down)]), torch.cat([now.up, up.to(now.up)], dim=1)
    set_attached(module, LowRank(down, up), slot)


def _all(module: nn.Module) -> list[LowRank]:
    return [factors for slot in SLOTS if (factors := attached(module, slot)) is not None]


def add(module: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """`y` (the layer's base output for `x`) plus the attached updates' products with `x`."""
    for down, up in _all(module):
        y = y + F.linear(F.linear(x, down.to(x.dtype)), up.to(x.dtype))
    return y


def linear(module: nn.Module, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x · Wᵀ + b for a layer that dequantised `weight` (out, in) for this call, with its attached updates: added to
    the weight when the call has more rows than the FLOP crossover, else as the activations' low-rank products."""
    if module.lora_down is None and module.stage_lora_down is None:
        return F.linear(x, weight, bias)
    out_features, in_features = weight.shape
    if x.numel() // in_features * (in_features + out_features) > in_features * out_features:
        return F.linear(x, dense_weight(module, weight), bias)
    return add(module, x, F.linear(x, weight, bias))


def dense_weight(module: nn.Module, weight: torch.Tensor) -> torch.Tensor:
    """The dequantised (out, in) `weight` with the attached updates added (new memory; `weight` is not written)."""
    for down, up in _all(module):
        weight = torch.addmm(weight, up.to(weight.dtype), down.to(weight.dtype))
    return weight
