"""HDR's float32 video decode across the persistent workers (`hdr_pipeline.decode_hdr`'s `video_decode`): a
`WorkerDecode` whose tasks ask every worker for a float32 decode (`DecodeTask.float32`: each casts its kept decoder
for the call and puts it back in its dtype after it), so that the caller's decoder stays in its own dtype, is
compared with the workers' in that dtype (`Signature`), and no float32 copy of it, nor a tile, is made here.

    decode = float32_decode(host.video_decode)       # None stays None: decode here
    generate_hdr(request, models, sampler=..., video_decode=decode)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ltx2_core.runtime.controller import Controller
from ltx2_core.runtime.decode_task import DecodeTask, WorkerDecode
from ltx2_core.runtime.protocol import Task


class Float32Tasks:
    """`controller` whose `DecodeTask`s are sent with `float32` set; every other call and attribute is the
    controller's own."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    def call(self, task: Task, should_stop: Callable[[], bool] | None = None) -> Any:
        if isinstance(task, DecodeTask):
            task = task._replace(float32=True)
        return self.controller.call(task, should_stop)

    def __getattr__(self, name: str) -> Any:
        if name == "controller":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.controller, name)


class Float32WorkerDecode(WorkerDecode):
    """`decode` (its controller, stop flag and report) asking the workers for a float32 decode; the latent it is
    given is sent as it is (float32 from `decode_hdr`). `float32` tells `decode_hdr` it decodes in float32."""

    float32 = True

    def __init__(self, decode: WorkerDecode) -> None:
        vars(self).update(vars(decode))
        self.controller = Float32Tasks(decode.controller)
        self.last = None


def float32_decode(decode: Callable[..., Any] | None) -> Float32WorkerDecode | None:
    """`decode` (a host's `video_decode`) in float32 on its workers; None (the host decodes here) stays None."""
    if decode is None or isinstance(decode, Float32WorkerDecode):
        return decode
    if not isinstance(decode, WorkerDecode):
        raise TypeError(f"a float32 decode is made of the workers' decode (runtime.WorkerDecode), got "
                        f"{type(decode).__name__}; decode HDR here (no video_decode)")
    return Float32WorkerDecode(decode)
