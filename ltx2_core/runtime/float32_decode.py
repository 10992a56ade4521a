"""HDR's float32 video decode across the persistent workers (`hdr_pipeline.decode_hdr`'s `video_decode`): a
`WorkerDecode` with `float32` set, whose tasks ask every worker for a float32 decode (`DecodeTask.float32`: each
casts its kept decoder for the call and puts it back in its dtype after it), so that the caller's decoder stays in
its own dtype, is compared with the workers' in that dtype (`Signature`), and no float32 copy of it, nor a tile, is
made here (unless a worker runs out of memory: the fallback decodes here, in float32 too).

    decode = float32_decode(host.video_decode)       # None stays None: decode here
    generate_hdr(request, models, sampler=..., video_decode=decode)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ltx2_core.runtime.decode_task import WorkerDecode


def float32_decode(decode: Callable[..., Any] | None) -> WorkerDecode | None:
    """`decode` (a host's `video_decode`) in float32 on its workers; None (the host decodes here) stays None."""
    if decode is None or isinstance(decode, WorkerDecode) and decode.float32:
        return decode
    if not isinstance(decode, WorkerDecode):
        raise TypeError(f"a float32 decode is made of the workers' decode (runtime.WorkerDecode), got "
                        f"{type(decode).__name__}; decode HDR here (no video_decode)")
    return WorkerDecode(decode.controller, decode.should_stop, decode.report, float32=True)
