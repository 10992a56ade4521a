"""The multi-GPU layout node; its widget (web/ltx2_parallel.js) sets the `layout` input."""

from __future__ import annotations

import json

import torch

from ltx2_core.parallel import AXES, ParallelConfig, ParallelConfigError
from ltx2_core.parallel.devices import visible_devices
from ltx2_core.releases import RELEASED_HEADS
from ltx2_core.runtime.links import LinkError, parse_address, workers_key

from . import bridge
from .handles import PARALLEL, Parallel
from .validation import limits_problem

MAX_PASSES = 4  # guidance passes of the release's guidance: the most a cfg degree can use
MAX_CPU_WORKERS = 4  # without a GPU, the layout runs as CPU worker processes sharing the cores: at most this many
ATTACHED_MAX = 64  # workers that may attach through torchrun (as web/ltx2_parallel_logic.js)


EXAMPLE = '{"cfg": 2, "sp": 1, "tp": 1}'


def parse(layout: str) -> ParallelConfig:
    """The widget's JSON value as a ParallelConfig: an object of whole numbers under the keys cfg, sp and tp (each
    absent one 1); ParallelConfigError naming the fix for anything else (a fraction, an unknown key, a number too
    large for a float), which would otherwise run as something else or fail in Python's words."""
    try:
        value = json.loads(layout)
    except (ValueError, TypeError) as exc:
        raise ParallelConfigError(f"must be JSON like {EXAMPLE}, got {str(layout)[:80]!r} ({exc})") from None
    if not isinstance(value, dict):
        raise ParallelConfigError(f"must be a JSON object like {EXAMPLE}, got {str(layout)[:80]!r}")
    if unknown := sorted(set(value) - set(AXES)):
        raise ParallelConfigError(f"{', '.join(map(repr, unknown))[:80]} is no axis; the axes are "
                                  f"{', '.join(AXES)}, e.g. {EXAMPLE}")
    for axis in AXES:
        degree = value.get(axis, 1)
        if isinstance(degree, bool) or not isinstance(degree, int):
            raise ParallelConfigError(f"{axis} {str(degree)[:40]} is not a whole number; give each degree as a whole "
                                      f"number ≥ 1, e.g. {EXAMPLE}")
    return ParallelConfig(*(value.get(axis, 1) for axis in AXES))


class LTX2ParallelConfig:
    DESCRIPTION = ("How one generation spreads over several GPUs: cfg (guidance passes) × sp (video tokens) × tp "
                   "(weights). Plug it into the checkpoint loader.")
    CATEGORY = "LTX-2/loaders"
    RETURN_TYPES = (PARALLEL,)
    RETURN_NAMES = ("parallel",)
    FUNCTION = "make"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "layout": ("STRING", {"default": '{"cfg": 1, "sp": 1, "tp": 1}',
                                  "tooltip": "cfg × sp × tp as JSON; the widget below sets it"}),
            "guidance_passes": ("INT", {"default": 4, "min": 1, "max": 4, "tooltip": "guidance passes of the runs "
                                        "(4 with the release's guidance, 1 for distilled): cfg cannot exceed it"}),
        }, "optional": {
            "attach": ("STRING", {"default": "", "tooltip": "empty: one worker process per GPU of this machine. "
                                  "HOST:PORT: listen there for workers launched by torchrun on this or other "
                                  "machines (python -m ltx2_core.runtime --connect HOST:PORT, the same "
                                  "LTX2_WORKERS_KEY on both sides)"}),
        }}

    @classmethod
    def VALIDATE_INPUTS(cls, layout: str | None = None, attach: str | None = ""):
        """The layout and the address when queued: the layout's form, the heads, cfg within the most guidance
        passes, and the workers it needs against this machine's bound (its GPUs, or MAX_CPU_WORKERS without one),
        or ATTACHED_MAX when torchrun's workers attach. Checked when the node runs: cfg within guidance_passes
        (ComfyUI checks guidance_passes' own range)."""
        if problem := limits_problem(cls, dict(layout=layout, attach=attach)) or attach_problem(attach):
            return problem
        if layout is None:
            return True
        bound = ATTACHED_MAX if attach is None or attach.strip() else local_bound()
        try:
            worker_bound(parse(layout).check(heads=RELEASED_HEADS, passes=MAX_PASSES), bound)
        except ParallelConfigError as exc:
            return f"layout: {exc}"
        return True

    def make(self, layout: str, guidance_passes: int = 4, attach: str = ""):
        if problem := attach_problem(attach):
            raise ValueError(problem)
        attach = attach.strip() or None
        config = parse(layout).check(heads=RELEASED_HEADS, passes=guidance_passes)
        return (Parallel(worker_bound(config, ATTACHED_MAX if attach else local_bound()), attach),)


def attach_problem(attach: str | None) -> str | None:
    """Why `attach` is no address torchrun's workers can attach to (HOST:PORT, and the shared key set); None when
    empty (workers spawned here), fine or linked."""
    try:
        if attach and attach.strip():
            parse_address(attach.strip())
            workers_key()
    except LinkError as exc:
        return f"attach: {exc}"
    return None


def local_bound() -> int:
    """The workers this machine may run: one per visible GPU, or MAX_CPU_WORKERS CPU processes without a GPU."""
    return len(visible_devices()) if torch.cuda.is_available() else MAX_CPU_WORKERS


def worker_bound(config: ParallelConfig, bound: int) -> ParallelConfig:
    """`config` unless it needs more than `bound` workers (ParallelConfigError naming the fix)."""
    if config.world_size > bound:
        where = ("GPUs are visible" if torch.cuda.is_available() else "CPU workers are the most without a GPU") \
            if bound != ATTACHED_MAX else "workers can attach"
        raise ParallelConfigError(f"cfg × sp × tp = {config.world_size} workers, but {bound} {where}; lower a "
                                  "degree")
    return config


def devices_info() -> dict:
    """GET /ltx2/devices: the GPUs (name, total and free bytes) and the worker bounds the layout widget shows."""
    return {"devices": visible_devices(), "cpu_workers_max": MAX_CPU_WORKERS, "attached_max": ATTACHED_MAX}


bridge.add_json_route("/ltx2/devices", devices_info)
