"""The attention backends the transformer can run (`attention_select` picks one per call class), each declaring what
it serves: device types, CUDA compute capabilities, dtypes, head sizes, whether it takes a mask, and whether it is
exact (softmax(q·kᵀ/√d)·v to the dtype's rounding) or approximate (8-bit).

* `sdpa`: PyTorch's SDPA choosing its backend per call (what the transformer ran before the backends existed);
* `math`, `flash`, `cudnn`, `efficient`: PyTorch's SDPA with its backend pinned (`torch.nn.attention.sdpa_kernel`);
  on the CPU `flash` is SDPA's CPU flash kernel (what an unpinned SDPA runs there), which takes masks;
* `flash4`: FlashAttention 4 (PyPI `flash-attn-4`, imported as `flash_attn.cute`), Hopper and Blackwell, no mask;
* `sage` (PyPI `sageattention`) and `kitchen_int8` (comfy-kitchen's `int8_attention`, CUDA kernel only): 8-bit
  attention, approximate, only ever run when a user names them.

Every function takes and returns (B, tokens, heads, head_dim) as `attention.AttentionFunction`. The optional packages
are imported on first use (`installed`), never at import; their calls are custom ops, so `torch.compile` keeps one
graph around them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

Attend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]
HALF = frozenset({torch.float16, torch.bfloat16})
ANY_FLOAT = HALF | {torch.float32}
ANY_CAPABILITY = ((0, 0), (99, 0))


@dataclass(frozen=True)
class Backend:
    """One attention backend and what it serves (`problem` says why it cannot serve a call class)."""

    name: str
    what: str  # one line for errors and docs
    devices: frozenset[str]  # device types
    dtypes: dict[str, frozenset[torch.dtype]]  # per device type ("*": any other)
    head_dims: dict[str, Callable[[int], bool]]  # per device type ("*": any other)
    masks: frozenset[str]  # device types where it takes a mask (bool or additive bias)
    exact: bool
    run: Attend
    capability: tuple[tuple[int, int], tuple[int, int]] = ANY_CAPABILITY  # CUDA [from, below)
    package: str | None = None  # the pip name of an optional package it needs
    module: str | None = None  # what `installed` imports
    rocm: bool = False  # serves AMD GPUs (ROCm's "cuda" devices) too

    def problem(self, table: dict, dtype: torch.dtype, head_dim: int, masked: bool) -> str | None:
        """Why this backend cannot serve attention of `dtype` and `head_dim` (with a mask or not) on the device the
        capability `table` describes (`attention_select.device_table`); None when it can."""
        kind = table["type"]
        if "*" not in self.devices and kind not in self.devices:
            return f"it runs on {', '.join(sorted(self.devices))}, not {kind}"
        if table.get("hip") and not self.rocm:
            return "it runs on NVIDIA GPUs only, not AMD's"
        if self.package is not None and self.name not in table.get("packages", ()):
            return f"{self.package} is not installed here or does not load (pip install {self.package})"
        if kind == "cuda" and not table.get("hip"):
            low, high = self.capability
            capability = tuple(table["capability"])
            if not low <= capability < high:
                return (f"it needs compute capability {low[0]}.{low[1]} to below {high[0]}.{high[1]}, this GPU has "
                        f"{capability[0]}.{capability[1]}")
        dtypes = self.dtypes.get(kind, self.dtypes.get("*", frozenset()))
        if dtype not in dtypes:
            names = ", ".join(sorted(str(d).removeprefix("torch.") for d in dtypes))
            return f"it takes {names} on {kind}, not {str(dtype).removeprefix('torch.')}"
        if not self.head_dims.get(kind, self.head_dims.get("*", lambda d: False))(head_dim):
            return f"it does not take head size {head_dim}"
        if masked and "*" not in self.masks and kind not in self.masks:
            return "it takes no attention mask"
        return None


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """PyTorch's SDPA with the backend PyTorch picks per call."""
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask)
    return out.transpose(1, 2)


def batched(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """k and v broadcast to q's batch (a view): keys and values computed once per run for a batch of passes (the
    fused kernels take no batch broadcasting; a shape check, no device work)."""
    if k.shape[0] == q.shape[0]:
        return k, v
    return k.expand(q.shape[0], *k.shape[1:]), v.expand(q.shape[0], *v.shape[1:])


def _sdpa(backend: SDPBackend) -> Attend:
    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        k, v = batched(q, k, v)
        with sdpa_kernel(backend):
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                 attn_mask=mask)
        return out.transpose(1, 2)

    run.__name__ = f"sdpa_{backend.name.lower()}"
    return run


def installed(backend: Backend) -> bool:
    """Whether the optional package `backend` needs imports here (always True for one that needs none)."""
    if backend.module is None:
        return True
    try:
        importlib.import_module(backend.module)
    except Exception:  # noqa: BLE001 - a broken install (missing CUDA libraries, wrong torch) is not installed
        return False
    return True


# the optional packages' functions, looked up when the custom op runs (tests put a CPU stand-in here)
IMPLEMENTATIONS: dict[str, Callable[..., torch.Tensor]] = {}


def _implementation(name: str) -> Callable[..., torch.Tensor]:
    if name not in IMPLEMENTATIONS:
        if name == "flash4":
            IMPLEMENTATIONS[name] = importlib.import_module("flash_attn.cute").flash_attn_func
        elif name == "sage":
            IMPLEMENTATIONS[name] = importlib.import_module("sageattention").sageattn
        else:
            IMPLEMENTATIONS[name] = importlib.import_module("comfy_kitchen").int8_attention
    return IMPLEMENTATIONS[name]


@torch.library.custom_op("ltx2::flash4_attention", mutates_args=())
def _flash4_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    out = _implementation("flash4")(q, k, v)  # (B, S, H, D) in and out; returns (out, lse)
    return (out[0] if isinstance(out, tuple) else out).contiguous()


@_flash4_op.register_fake
def _(q, k, v):
    return torch.empty_like(q)


@torch.library.custom_op("ltx2::sage_attention", mutates_args=())
def _sage_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return _implementation("sage")(q, k, v, tensor_layout="NHD", is_causal=False).contiguous()


@_sage_op.register_fake
def _(q, k, v):
    return torch.empty_like(q)


def flash4(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """FlashAttention 4 (never given a mask: the selection routes masked calls elsewhere)."""
    k, v = batched(q, k, v)
    return _flash4_op(q, k.contiguous(), v.contiguous())


def sage(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """SageAttention: int8 q·kᵀ (approximate; never given a mask)."""
    k, v = batched(q, k, v)
    return _sage_op(q, k.contiguous(), v.contiguous())


def kitchen_int8(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
                 ) -> torch.Tensor:
    """comfy-kitchen's INT8 attention (approximate), with the mask as SDPA takes it."""
    k, v = batched(q, k, v)
    out = _implementation("kitchen_int8")(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask)
    return out.transpose(1, 2)


def _multiple_of_8(most: int) -> dict[str, Callable[[int], bool]]:
    return {"cuda": lambda d: 8 <= d <= most and d % 8 == 0}


ANY_HEAD = {"*": lambda d: d > 0}


EVERYWHERE = frozenset({"*"})
BACKENDS: dict[str, Backend] = {b.name: b for b in (
    Backend("sdpa", "PyTorch SDPA, the backend PyTorch picks per call (any device)", EVERYWHERE, {"*": ANY_FLOAT},
            ANY_HEAD, EVERYWHERE, True, sdpa, rocm=True),
    Backend("math", "PyTorch SDPA, math backend (the reference; any device)", EVERYWHERE, {"*": ANY_FLOAT},
            ANY_HEAD, EVERYWHERE, True, _sdpa(SDPBackend.MATH), rocm=True),
    Backend("flash", "PyTorch SDPA, flash backend (FlashAttention 2 on CUDA, the CPU flash kernel)",
            frozenset({"cpu", "cuda"}), {"cpu": ANY_FLOAT, "cuda": HALF}, _multiple_of_8(256) | {"cpu": ANY_HEAD["*"]},
            frozenset({"cpu"}), True, _sdpa(SDPBackend.FLASH_ATTENTION), capability=((8, 0), (13, 0)), rocm=True),
    Backend("cudnn", "PyTorch SDPA, cuDNN backend", frozenset({"cuda"}), {"cuda": HALF}, _multiple_of_8(128),
            frozenset(), True, _sdpa(SDPBackend.CUDNN_ATTENTION), capability=((8, 0), (13, 0))),
    Backend("efficient", "PyTorch SDPA, memory-efficient backend", frozenset({"cuda"}), {"cuda": ANY_FLOAT},
            _multiple_of_8(512), frozenset({"cuda"}), True, _sdpa(SDPBackend.EFFICIENT_ATTENTION),
            capability=((5, 0), (99, 0)), rocm=True),
    Backend("flash4", "FlashAttention 4 (CuTe; Hopper sm90 and Blackwell sm100)", frozenset({"cuda"}),
            {"cuda": HALF}, {"cuda": lambda d: (8 <= d <= 128 and d % 8 == 0) or d == 256}, frozenset(), True, flash4,
            capability=((9, 0), (11, 0)), package="flash-attn-4", module="flash_attn.cute"),
    Backend("sage", "SageAttention: int8 q·kᵀ, 8-bit, approximate", frozenset({"cuda"}), {"cuda": HALF},
            {"cuda": lambda d: d in (64, 96, 128)}, frozenset(), False, sage, capability=((8, 0), (13, 0)),
            package="sageattention", module="sageattention"),
    Backend("kitchen_int8", "comfy-kitchen's int8 attention, 8-bit, approximate (its CUDA kernel)",
            frozenset({"cuda"}), {"cuda": ANY_FLOAT}, {"cuda": lambda d: 0 < d <= 256}, frozenset({"cuda"}), False,
            kitchen_int8, capability=((7, 5), (99, 0)), package="comfy-kitchen>=0.2.40", module="comfy_kitchen"),
)}
