"""comfy-kitchen's fused kernels for the transformer's hot ops, where they compute what ours compute; ours elsewhere.

One switch, `KERNELS` (`set_kernels` / `use_kernels`): "auto" (the default) takes a comfy-kitchen function where a
CUDA (with a PyTorch for CUDA ≥ 13, as ComfyUI), Triton or HIP backend of the installed comfy-kitchen, enabled in its
registry (inside ComfyUI: by ComfyUI's settings), serves that device and dtype (not its eager one), and ours
otherwise; "ours" never takes one; "kitchen" always takes one the installed comfy-kitchen has (on the CPU its eager
backend: how the tests prove they compute what ours do). A function missing from the installed comfy-kitchen
(ComfyUI pins 0.2.12, which lacks `rms_adaln` and `rms_rope1`) is always ours. docs/small_cards/kernels.md lists
which of comfy-kitchen's kernels match ours and which do not, and why.

* `rms_adaln(x, scale, shift, eps)`: RMSNorm(x)·(1 + scale) + shift (every AdaLN of a block);
* `layer_adaln(x, scale, shift, eps)`: LayerNorm(x)·(1 + scale) + shift (the output norm), comfy-kitchen's `adaln`;
* `qk_norm_rope(x, norm, rope, rope_type, head_dim)`: q/k RMSNorm across all heads, then RoPE per head.
  Interleaved: one `rms_rope1` over the whole width taken as one head (the norm spans every head as ours; the
  pairs (2j, 2j+1) never cross a head), or `apply_rope1` after our norm; split: our norm, then
  `apply_rope_split_half1` per head (comfy-kitchen's fused norm is per head, ours across heads). The fused RoPE
  reads `Rope.freqs`, comfy-kitchen's rotation matrices, which `rope_tables` builds beside cos/sin when
  `rope_fused` says a run will use them (the parallel passes cut them with cos/sin); a Rope without them runs
  ours.

Which backends serve what is read from comfy-kitchen's registry when this module is imported (`refresh()` reads it
again, e.g. after `comfy_kitchen.disable_backend`); a forward only reads that table (no host sync, compiles into one
graph). Every kernel here is device work only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from ltx2_core.model.transformer.rope import apply_rope
from ltx2_core.types import Rope

try:  # optional: ComfyUI ships it; without it every op is ours
    import comfy_kitchen as ck
    from comfy_kitchen.registry import registry as _registry
except ImportError:
    ck = _registry = None

MODES = ("auto", "ours", "kitchen")
KERNELS = "auto"
GPU_BACKENDS = ("cuda", "triton", "hip")  # comfy-kitchen's accelerated backends; "eager" is its portable one
OPS = ("rms_adaln", "adaln", "rms_rope1", "apply_rope1", "apply_rope_split_half1")
_INPUT = "x"  # every op's input tensor, whose dtypes a backend's constraints name


class Served(NamedTuple):
    """Where comfy-kitchen's accelerated backends run one op: device types, dtypes (None: any), backends."""

    devices: frozenset[str]
    dtypes: frozenset[torch.dtype] | None
    backends: tuple[str, ...]


def _read_registry() -> dict[str, Served]:
    """Per op of OPS that a GPU backend of the installed comfy-kitchen serves: the devices and dtypes it accepts."""
    if ck is None:
        return {}
    table = {}
    for op in OPS:
        if not hasattr(ck, op):
            continue
        devices, dtypes, backends = set(), set(), []
        for backend in GPU_BACKENDS:
            # the registry answers "which ops" only through its table (list_backends copies every backend's list)
            if not _registry.is_available(backend) or op not in _registry._capabilities.get(backend, ()):
                continue
            if backend == "cuda" and not cuda_backend_usable():
                continue
            backends.append(backend)
            constraints = _registry.get_constraints(backend, op)
            devices |= set(constraints.default_devices) if constraints is not None else {"cuda"}
            param = None if constraints is None else constraints.params.get(_INPUT)
            allowed = None if param is None else param.dtypes
            dtypes = None if dtypes is None or allowed is None else dtypes | set(allowed)
        if backends:
            table[op] = Served(frozenset(devices - {"cpu"}), None if dtypes is None else frozenset(dtypes),
                               tuple(backends))
    return table


def cuda_backend_usable() -> bool:
    """ComfyUI's rule (comfy/quant_ops.py, which disables the backend otherwise): comfy-kitchen's CUDA kernels want
    a PyTorch built for CUDA ≥ 13. Read here, the registry left as it is."""
    version = torch.version.cuda
    return version is not None and tuple(int(part) for part in version.split(".")[:2]) >= (13, 0)


_SERVED = _read_registry()


def refresh() -> None:
    """Reads comfy-kitchen's registry again (after enabling or disabling one of its backends)."""
    global _SERVED
    _SERVED = _read_registry()


def set_kernels(mode: str) -> None:
    """Sets the switch for every transformer in this process: "auto", "ours" or "kitchen"."""
    global KERNELS
    if mode not in MODES:
        raise ValueError(f"kernels mode {mode!r} is not one of {', '.join(MODES)}; use 'auto' (comfy-kitchen's "
                         "GPU kernels where they serve the device), 'ours', or 'kitchen' (always comfy-kitchen)")
    KERNELS = mode


@contextlib.contextmanager
def use_kernels(mode: str) -> Iterator[None]:
    """`set_kernels(mode)` inside the block, the previous mode after it."""
    previous = KERNELS
    set_kernels(mode)
    try:
        yield
    finally:
        set_kernels(previous)


def has(op: str) -> bool:
    """Whether the installed comfy-kitchen has `op`."""
    return ck is not None and hasattr(ck, op)


def available(op: str, device: torch.device, dtype: torch.dtype) -> bool:
    """Whether a GPU backend of the installed comfy-kitchen (not its eager one) serves `op` on `device` in `dtype`."""
    served = _SERVED.get(op)
    return (served is not None and device.type in served.devices
            and (served.dtypes is None or dtype in served.dtypes))


def fused(op: str, device: torch.device, dtype: torch.dtype) -> bool:
    """Whether the switch takes comfy-kitchen's `op` for a tensor on `device` in `dtype`."""
    if KERNELS == "ours" or not has(op):
        return False
    return KERNELS == "kitchen" or available(op, device, dtype)


def rope_fused(rope_type: str, device: torch.device, dtype: torch.dtype) -> bool:
    """Whether a run's RoPE on `device` in `dtype` goes through comfy-kitchen (then its tables carry `freqs`)."""
    ops = ("rms_rope1", "apply_rope1") if rope_type == "interleaved" else ("apply_rope_split_half1",)
    return any(fused(op, device, dtype) for op in ops)


def rms_adaln(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm(x) (no weight) · (1 + scale) + shift over the last dim; scale/shift broadcast to x, same dtype."""
    if scale.dtype == shift.dtype == x.dtype and fused("rms_adaln", x.device, x.dtype):
        return ck.rms_adaln(x, scale, shift, eps)
    return F.rms_norm(x, (x.shape[-1],), eps=eps) * (1 + scale) + shift


def layer_adaln(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm(x) (no weight, no bias) · (1 + scale) + shift over the last dim."""
    if scale.dtype == shift.dtype == x.dtype and fused("adaln", x.device, x.dtype):
        return ck.adaln(x, scale, shift, eps)
    return F.layer_norm(x, (x.shape[-1],), eps=eps) * (1 + scale) + shift


def qk_norm_rope(x: torch.Tensor, norm: nn.Module | None, rope: Rope | None, rope_type: str,
                 head_dim: int) -> torch.Tensor:
    """x (B, tokens, heads·head_dim) -> (B, tokens, heads, head_dim): `norm` (the q/k RMSNorm over the whole width;
    None: x is normalised already), then RoPE of `rope` per head (None: none). The fused norm is taken only for a
    norm that says it is a plain weighted RMSNorm (`fusable`, with `weight` and `eps`); any other (a tensor-parallel
    shard's) runs as it is."""
    plain = getattr(norm, "fusable", False)
    freqs = None if rope is None else rope.freqs
    if freqs is not None and rope_type == "interleaved":
        whole = freqs.flatten(2, 3).unsqueeze(2)  # (B, tokens, 1, width/2, 2, 2): the whole width as one head
        if plain and fused("rms_rope1", x.device, x.dtype):
            out = ck.rms_rope1(x.unsqueeze(2), whole, norm.weight, norm.eps)
            return out.squeeze(2).unflatten(-1, (-1, head_dim))
        if fused("apply_rope1", x.device, x.dtype):
            normed = x if norm is None else norm(x)
            return ck.apply_rope1(normed.unsqueeze(2), whole).squeeze(2).unflatten(-1, (-1, head_dim))
    heads = (x if norm is None else norm(x)).unflatten(-1, (-1, head_dim))
    if rope is None:
        return heads
    if freqs is not None and rope_type == "split" and fused("apply_rope_split_half1", x.device, x.dtype):
        return ck.apply_rope_split_half1(heads, freqs)
    return apply_rope(heads, rope, rope_type)
