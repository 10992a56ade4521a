"""The multi-GPU layout node; its widget (web/ltx2_parallel.js) sets the `layout` input."""

from __future__ import annotations

import json

import torch

from ltx2_core.parallel import AXES, ParallelConfig, ParallelConfigError
from ltx2_core.parallel.choose import fastest_layout, predicted_times
from ltx2_core.parallel.cost_model import released_config
from ltx2_core.parallel.devices import visible_devices
from ltx2_core.parallel.traffic import weight_bytes
from ltx2_core.releases import RELEASED_HEADS
from ltx2_core.runtime.links import LinkError, parse_address, workers_key

from . import bridge
from .handles import PARALLEL, Parallel
from .validation import limits_problem

MAX_PASSES = 4  # guidance passes of the release's guidance: the most a cfg degree can use
MAX_CPU_WORKERS = 4  # without a GPU, the layout runs as CPU worker processes sharing the cores: at most this many
ATTACHED_MAX = 64  # workers that may attach through torchrun (as web/ltx2_parallel_logic.js)


EXAMPLE = '{"cfg": 2, "sp": 1, "tp": 1}'
AUTO = "auto"  # the layout picked per run by the cost model from this machine's GPUs
PREDICTED_MAX = 16  # the most GPUs the widget's predicted times cover


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
                                  "tooltip": "cfg × sp × tp as JSON; the widget below sets it. auto: the layout "
                                             "the cost model predicts fastest on this machine's GPUs, per run"}),
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
        if is_auto(layout):
            return True if not (attach and attach.strip()) else f"layout: {AUTO_ATTACHED}"
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
        if is_auto(layout) and attach:
            raise ParallelConfigError(AUTO_ATTACHED)
        config = (auto_layout(guidance_passes) if is_auto(layout) else parse(layout)).check(
            heads=RELEASED_HEADS, passes=guidance_passes)
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


AUTO_ATTACHED = ("auto picks from this machine's GPUs, not from workers that attach; give the layout as JSON, "
                 f"e.g. {EXAMPLE}")


def is_auto(layout: str | None) -> bool:
    return isinstance(layout, str) and layout.strip().lower() == AUTO


def auto_layout(passes: int) -> ParallelConfig:
    """The layout of this machine's GPUs the cost model predicts fastest for the release's two-stage run with
    `passes` guidance passes, the weights fitting the smallest free memory; one worker without a GPU (CPU workers
    share the cores, so more are no faster)."""
    devices = visible_devices() if torch.cuda.is_available() else []
    if not devices:
        return ParallelConfig()
    return fastest_layout(len(devices), passes, weight_bytes(released_config()), min(d["free"] for d in devices),
                          [d["name"] for d in devices])


def devices_info() -> dict:
    """GET /ltx2/devices: the GPUs (name, total and free bytes) and the worker bounds the layout widget shows."""
    return {"devices": visible_devices(), "cpu_workers_max": MAX_CPU_WORKERS, "attached_max": ATTACHED_MAX}


def layout_times(query: dict[str, str]) -> dict:
    """GET /ltx2/layout_times?gpus=N&name=GPU: the cost model's predicted seconds of the release's two-stage run
    for every layout of 1..N GPUs and 1..4 guidance passes (keys "cfg,sp,tp,passes"), for the GPU named (the H100's
    figures over PCIe 4 for a GPU the model does not know, said in the answer). Predictions, not measurements."""
    try:
        gpus = min(max(int(query.get("gpus", "1")), 1), PREDICTED_MAX)
    except ValueError:
        gpus = 1
    name = str(query.get("name", ""))[:100]
    return predicted_times(gpus, [name] * gpus if name else [])


bridge.add_json_route("/ltx2/devices", devices_info)
bridge.add_json_route("/ltx2/layout_times", layout_times, query=True)
