"""Which attention backend (`attention_backends.BACKENDS`) runs each attention call of the transformer.

One switch, `ATTENTION` (`set_attention` / `use_attention`; the CLI's --attention, the model loader nodes' `attention`
input): "auto" (the default) takes, per call class (device, dtype, head size, masked or not), the first backend of
the device's row of `RANKING` (fastest first) that serves the class, among the EXACT backends only: auto never takes
an 8-bit one. A backend's name forces it wherever it serves; a call class it cannot serve (a mask it does not take)
takes auto's choice. `set_attention(mode, device, dtype, head_dims)` checks a named backend against the device,
dtype and head sizes at set-up and raises a ValueError naming the install or the alternatives, so a run never fails
midway.

What the selection reads about a device is a plain dict, its capability table (`device_table`: type, CUDA compute
capability, which optional packages load), read once per device and passed in by tests to stand for an H100, an
H200, a Blackwell card or no GPU. The choice per call class is made once (`attend` keeps it in a dict): a forward
only looks it up by the tensors' metadata, with no host sync, so compiled and captured steps keep one graph.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import torch

from ltx2_core.model.transformer.attention_backends import BACKENDS, Attend, Backend, installed

MODES = ("auto", *BACKENDS)
ATTENTION = "auto"
# the exact backends per device class, fastest first: the expected order until bench/suite_attention.py measures it
# on each card (it flags a row whose first choice is not the measured fastest)
RANKING: dict[str, tuple[str, ...]] = {
    "sm100": ("flash4", "cudnn", "flash", "efficient", "math"),  # Blackwell datacentre (B200, B300)
    "sm90": ("flash4", "cudnn", "flash", "efficient", "math"),  # Hopper (H100, H200)
    "cuda": ("flash", "cudnn", "efficient", "math"),  # other CUDA GPUs (and ROCm's), FlashAttention 2 first
    "cpu": ("flash", "math"),  # SDPA's CPU flash kernel takes masks too
    "other": ("sdpa",),  # MPS, XPU, ...: PyTorch's own pick
}
_TABLES: dict[tuple[str, int | None], dict] = {}
_CHOSEN: dict[tuple, Attend] = {}  # by (mode, device, dtype, head size, masked): filled once, never emptied


def device_class(table: dict) -> str:
    """The row of `RANKING` a capability table belongs to."""
    if table["type"] == "cpu":
        return "cpu"
    if table["type"] != "cuda":
        return "other"
    if table.get("hip"):
        return "cuda"
    return {9: "sm90", 10: "sm100"}.get(tuple(table["capability"])[0], "cuda")


def device_table(device: torch.device | str) -> dict:
    """The capability table of a real device (read once per device): type, compute capability and name (CUDA),
    `hip` (an AMD GPU), and `packages`: the optional backends whose package loads and serves this device."""
    device = _tensor_device(device)
    key = (device.type, device.index)
    if key not in _TABLES:
        table: dict = {"type": device.type, "capability": None, "packages": frozenset()}
        if device.type == "cuda":
            table |= {"capability": torch.cuda.get_device_capability(device),
                      "name": torch.cuda.get_device_name(device), "hip": torch.version.hip is not None,
                      "packages": frozenset(name for name, b in BACKENDS.items()
                                            if b.package is not None and _loads(b, device))}
        _TABLES[key] = table
    return _TABLES[key]


def _loads(backend: Backend, device: torch.device) -> bool:
    if not installed(backend):
        return False
    if backend.name == "kitchen_int8":  # comfy-kitchen imports anywhere; its int8 kernel needs its CUDA extension
        import comfy_kitchen

        return hasattr(comfy_kitchen, "int8_attention") and comfy_kitchen.int8_attention_is_available(device)
    return True


def choose(mode: str, table: dict, dtype: torch.dtype, head_dim: int, masked: bool,
           ranking: dict[str, tuple[str, ...]] | None = None) -> Backend:
    """The backend `mode` runs attention of `dtype` and `head_dim` (with a mask or not) on the device of `table`:
    a named backend where it serves, else (and for "auto") the first exact backend of the device's ranking that
    serves; PyTorch's SDPA, which serves everything, when none does."""
    _check_mode(mode)
    if mode != "auto" and BACKENDS[mode].problem(table, dtype, head_dim, masked) is None:
        return BACKENDS[mode]
    for name in (ranking or RANKING)[device_class(table)]:
        backend = BACKENDS[name]
        if backend.exact and backend.problem(table, dtype, head_dim, masked) is None:
            return backend
    return BACKENDS["sdpa"]


def check_attention(mode: str, table: dict, dtype: torch.dtype | None = None, head_dims: Iterable[int] = ()) -> None:
    """ValueError naming the fix when `mode` names a backend that cannot serve the device of `table` (and unmasked
    attention of `dtype` at every one of `head_dims`, where given); "auto" always serves."""
    _check_mode(mode)
    if mode == "auto":
        return
    backend, dims = BACKENDS[mode], tuple(head_dims) or (None,)
    for head_dim in dims:
        problem = _device_problem(backend, table) if dtype is None or head_dim is None else \
            backend.problem(table, dtype, head_dim, masked=False)
        if problem is not None:
            usable = [name for name, b in BACKENDS.items() if (_device_problem(b, table) if dtype is None or
                      head_dim is None else b.problem(table, dtype, head_dim, masked=False)) is None]
            raise ValueError(f"attention {mode!r} ({backend.what}) cannot run here: {problem}; use 'auto' (the "
                             f"fastest exact one) or one of {', '.join(usable)}")


def _device_problem(backend: Backend, table: dict) -> str | None:
    """Why `backend` cannot serve the device at all, whatever the dtype and head size (None: some it serves)."""
    problems = [backend.problem(table, dtype, head_dim, masked=False)
                for dtype in (torch.bfloat16, torch.float16, torch.float32) for head_dim in (128, 64)]
    return None if None in problems else problems[0]


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"attention {mode!r} is not one of {', '.join(MODES)}; use 'auto' (the fastest exact "
                         "backend of the device)")


def set_attention(mode: str, device: torch.device | str | None = None, dtype: torch.dtype | None = None,
                  head_dims: Iterable[int] = ()) -> None:
    """Sets the switch for every transformer in this process, checked against `device` (and `dtype`, `head_dims`)
    where given (`check_attention`); with all three, the choices of those call classes are made here, before any
    forward (a compiled one then finds them made and keeps its graph)."""
    global ATTENTION
    head_dims = tuple(head_dims)
    if device is not None:
        check_attention(mode, device_table(device), dtype, head_dims)
    else:
        _check_mode(mode)
    ATTENTION = mode
    if device is not None and dtype is not None:
        device = _tensor_device(device)
        for head_dim in head_dims:
            for masked in (False, True):
                key = (mode, device, dtype, head_dim, masked)
                if key not in _CHOSEN:
                    _CHOSEN[key] = choose(mode, device_table(device), dtype, head_dim, masked).run


def _tensor_device(device: torch.device | str) -> torch.device:
    """`device` as a tensor on it names it (a CUDA device with its index)."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


@contextlib.contextmanager
def use_attention(mode: str, device: torch.device | str | None = None, dtype: torch.dtype | None = None,
                  head_dims: Iterable[int] = ()) -> Iterator[None]:
    """`set_attention(...)` inside the block, the previous mode after it."""
    previous = ATTENTION
    set_attention(mode, device, dtype, head_dims)
    try:
        yield
    finally:
        set_attention(previous)


def chosen(device: torch.device | str, dtype: torch.dtype, head_dim: int, masked: bool) -> str:
    """The name of the backend the switch runs for this call class on `device`."""
    return choose(ATTENTION, device_table(device), dtype, head_dim, masked).name


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Attention (`attention.AttentionFunction`) through the backend the switch chose for this call class."""
    key = (ATTENTION, q.device, q.dtype, q.shape[-1], mask is not None)
    run = _CHOSEN.get(key)
    if run is None:
        run = _CHOSEN[key] = choose(ATTENTION, device_table(q.device), q.dtype, q.shape[-1], mask is not None).run
    return run(q, k, v, mask)
