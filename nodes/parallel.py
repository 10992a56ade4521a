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
from .validation import stated_limits

MAX_PASSES = 4  # guidance passes of the release's guidance: the most a cfg degree can use
MAX_CPU_WORKERS = 4  # without a GPU, the layout runs as CPU worker processes sharing the cores: at most this many
ATTACHED_MAX = 64  # workers that may attach through torchrun (as web/ltx2_parallel_logic.js)


def parse(layout: str) -> ParallelConfig:
    """The widget's JSON value as a ParallelConfig; ParallelConfigError naming the problem."""
    try:
        value = json.loads(layout)
        degrees = [int(value.get(axis, 1)) for axis in AXES]
    except (ValueError, TypeError, AttributeError) as exc:
        raise ParallelConfigError(f'layout must be JSON like {{"cfg": 2, "sp": 1, "tp": 1}}, got {str(layout)[:80]!r} '
                                  f'({exc})')
    return ParallelConfig(*degrees)


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
    def VALIDATE_INPUTS(cls, layout: str | None = None):
        """Only the layout, so a problem is reported on it alone (ComfyUI checks guidance_passes itself): its form,
        the heads, cfg within the most guidance passes and at most ATTACHED_MAX workers. The bounds that depend on
        the other inputs (this machine's devices unless torchrun's workers attach, cfg within guidance_passes) are
        checked when the node runs, before any worker starts."""
        if problem := stated_limits(cls, "layout", layout):
            return problem
        try:
            if layout is not None:
                config = parse(layout).check(heads=RELEASED_HEADS, passes=MAX_PASSES)
                worker_bound(config, ATTACHED_MAX)
        except ParallelConfigError as exc:
            return str(exc)
        return True

    def make(self, layout: str, guidance_passes: int = 4, attach: str = ""):
        attach = attach.strip() or None
        try:
            if attach:
                parse_address(attach)
                workers_key()
        except LinkError as exc:
            raise ValueError(f"attach: {exc}")
        config = parse(layout).check(heads=RELEASED_HEADS, passes=guidance_passes)
        return (Parallel(worker_bound(config, ATTACHED_MAX if attach else local_bound()), attach),)


def local_bound() -> int:
    """The workers this machine may run: one per visible GPU, or MAX_CPU_WORKERS CPU processes without a GPU."""
    return len(visible_devices()) if torch.cuda.is_available() else MAX_CPU_WORKERS


def worker_bound(config: ParallelConfig, bound: int) -> ParallelConfig:
    """`config` unless it needs more than `bound` workers (ParallelConfigError naming the fix)."""
    if config.world_size > bound:
        where = ("GPUs are visible" if torch.cuda.is_available() else "CPU workers are the most without a GPU") \
            if bound != ATTACHED_MAX else "workers can attach"
        raise ParallelConfigError(f"layout: cfg × sp × tp = {config.world_size} workers, but {bound} {where}; "
                                  "lower a degree")
    return config


def devices_info() -> dict:
    """GET /ltx2/devices: the GPUs (name, total and free bytes) and the worker bounds the layout widget shows."""
    return {"devices": visible_devices(), "cpu_workers_max": MAX_CPU_WORKERS, "attached_max": ATTACHED_MAX}


bridge.add_json_route("/ltx2/devices", devices_info)
