"""The multi-GPU layout node; its widget (web/ltx2_parallel.js) sets the `layout` input."""

from __future__ import annotations

import json

import torch

from ltx2_core.parallel import AXES, ParallelConfig, ParallelConfigError
from ltx2_core.parallel.devices import visible_devices
from ltx2_core.runtime.links import LinkError, parse_address, workers_key

from . import bridge
from .handles import PARALLEL, Parallel
RELEASED_HEADS = (32, 32)  # video and audio heads of LTX-2 and LTX-2.3


def parse(layout: str) -> ParallelConfig:
    """The widget's JSON value as a ParallelConfig; ParallelConfigError naming the problem."""
    try:
        value = json.loads(layout)
        degrees = [int(value.get(axis, 1)) for axis in AXES]
    except (ValueError, TypeError, AttributeError) as exc:
        raise ParallelConfigError(f'layout must be JSON like {{"cfg": 2, "sp": 1, "tp": 1}}, got {layout!r} ({exc})')
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
    def VALIDATE_INPUTS(cls, layout: str | None = None, guidance_passes: int | None = None,
                        attach: str | None = None):
        try:
            if attach and attach.strip():
                parse_address(attach.strip())
                workers_key()
            if layout is not None:  # the local GPUs bound the layout unless torchrun launches the workers
                local = torch.cuda.is_available() and not (attach and attach.strip())
                parse(layout).check(devices=len(visible_devices()) if local else None, heads=RELEASED_HEADS,
                                    passes=guidance_passes)
        except (ParallelConfigError, LinkError) as exc:
            return str(exc)
        return True

    def make(self, layout: str, guidance_passes: int = 4, attach: str = ""):
        return (Parallel(parse(layout).check(heads=RELEASED_HEADS, passes=guidance_passes), attach.strip() or None),)


bridge.add_json_route("/ltx2/devices", lambda: {"devices": visible_devices()})
