"""One generation over the ranks of a torchrun launch: join the group, shard the model, share the prompts.

`torchrun --nproc-per-node N -m ltx2_core generate --cfg C --sp S --tp T` (C·S·T = N): every rank holds its shard
of the transformer and samples; the ranks encode the prompts together (`parallel.text_encode`; global rank 0 alone,
then broadcasting the embeddings, where the prompt is enhanced); every rank decodes its share of the video's tiles
(`tiled_decode`), rank 0 blends them, decodes the audio and writes. NCCL on GPUs (one device per local rank), gloo on
the CPU.
"""

from __future__ import annotations

import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.parallel.cfg_parallel import CfgParallel
from ltx2_core.parallel.choose import regroups
from ltx2_core.parallel.config import ParallelConfig, stage_layout
from ltx2_core.parallel.mesh import device_mesh
from ltx2_core.parallel.sequence_parallel import sequence_parallel
from ltx2_core.parallel.stage_regroup import StageRegroup
from ltx2_core.parallel.tiled_decode import SpreadDecode
from ltx2_core.parallel.tensor_parallel import tensor_parallel
from ltx2_core.pipeline import Distribution
from ltx2_core.request_encoding import Prompts
from ltx2_core.types import TextEmbeddings


def ranks() -> int:
    """The ranks torchrun started (1 without torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def local_device(device: str) -> torch.device:
    """This rank's device: its local GPU under torchrun, else `device`."""
    if device.startswith("cuda"):
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device(device)


def is_main() -> bool:
    """Global rank 0 (also before the group joins: torchrun's RANK), or no torchrun at all."""
    return dist.get_rank() == 0 if dist.is_initialized() else os.environ.get("RANK", "0") == "0"


REPORTED = "ltx2_core/refusal-reported"


def report_refusal(message: str, wait_s: float = 30.0) -> None:
    """Every rank finds the same bad request before the group joins: rank 0 prints `message` once, then tells the
    others through torchrun's store; the others wait (at most `wait_s`) for that before they return. A rank that
    exits first would make torchrun terminate rank 0 before it has printed (seen in CI: the refusal was lost)."""
    store = _launch_store(wait_s) if ranks() > 1 else None
    if is_main():
        print(message, file=sys.stderr, flush=True)
        if store is not None:
            store.set(REPORTED, "1")
    elif store is not None:
        try:
            store.wait([REPORTED], datetime.timedelta(seconds=wait_s))
        except RuntimeError:
            pass  # rank 0 found no problem or is gone: its own exit tells torchrun


def _launch_store(wait_s: float):
    """A client of the store torchrun's agent serves at MASTER_ADDR:MASTER_PORT, or None outside torchrun."""
    address, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not address or not port:
        return None
    try:
        return dist.TCPStore(address, int(port), is_master=False, timeout=datetime.timedelta(seconds=wait_s))
    except (RuntimeError, ValueError):
        return None


def leave(wait_s: float = 60.0) -> None:
    """Leaves the process group, after waiting (at most `wait_s`) for every rank to reach here on gloo: a gloo rank
    that tears its group down while a peer still holds the connection can abort the peer's process at exit
    ("terminate called without an active exception", seen in about 1 of 10 two-rank runs). A peer that never
    comes (it died) is waited for no longer than `wait_s`."""
    if not dist.is_initialized():
        return
    if dist.get_backend() == "gloo" and dist.get_world_size() > 1:
        try:
            dist.monitored_barrier(timeout=datetime.timedelta(seconds=wait_s))
        except RuntimeError:
            pass  # a peer is gone: nothing left to wait for
    dist.destroy_process_group()


def tensor_parallel_for(mesh: DeviceMesh, layout: ParallelConfig):
    """The `parallelize` of a load (tensor parallelism over the mesh's tp axis), or None without it."""
    if layout.tp == 1:
        return None
    group = mesh["tp"].get_group()
    return lambda model: tensor_parallel(model, group)


def join(layout: ParallelConfig, device: torch.device) -> DeviceMesh:
    """Initialises the default group from torchrun's environment and returns the layout's mesh."""
    init_group(device)
    return device_mesh(layout, device.type)


def init_group(device: torch.device) -> None:
    """The default group from torchrun's environment (NCCL on GPUs, gloo on the CPU), once."""
    if not dist.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")


def finish(model: LTX2Transformer, mesh: DeviceMesh, layout: ParallelConfig) -> Distribution:
    """After the (tensor-parallel) load: sequence parallelism on the model, and how the run is distributed. A cfg
    layout regroups per stage (`stage_regroup`: a stage with fewer passes than cfg ranks splits its tokens over the
    cfg and sp ranks together) where tp·cfg·sp divides the heads. Collective (it may make the merged group)."""
    if layout.sp > 1:
        sequence_parallel(model, mesh["sp"].get_group())
    device = next(model.parameters()).device
    runner = _cfg_runner(model, mesh, layout) if layout.cfg > 1 else None
    return Distribution(runner, lambda encode_here: broadcast_prompts(encode_here, device), dist.get_rank() == 0,
                        SpreadDecode(report=print if dist.get_rank() == 0 else None))


def _cfg_runner(model: LTX2Transformer, mesh: DeviceMesh, layout: ParallelConfig) -> CfgParallel | StageRegroup:
    """The cfg runner, regrouping per stage where the heads allow it and the cost model predicts a gain (rank 0's
    call, the same on every rank); collective."""
    cfg = CfgParallel(mesh["cfg"].get_group())
    merged = stage_layout(layout, 1, (model.config.video.heads, model.config.audio.heads))
    decision = [merged != layout and regroups(layout, _device_names(mesh.device_type), _hosts())]
    dist.broadcast_object_list(decision, src=0)
    if not decision[0]:
        return cfg  # a stage with fewer passes than cfg ranks runs whole on every rank
    group = device_mesh(merged, mesh.device_type)["sp"].get_group()
    return StageRegroup(cfg, mesh["sp"].get_group() if layout.sp > 1 else None, group)


def _device_names(device_type: str) -> list[str]:
    """This machine's GPU names (none for CPU ranks)."""
    if device_type != "cuda":
        return []
    return [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())]


def _hosts() -> int:
    """How many machines the launch spans (torchrun's world over its ranks per machine; 1 when not launched)."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "0"))
    return max(1, dist.get_world_size() // local) if local else 1


def broadcast_prompts(encode_here, device: torch.device) -> Prompts:
    """Rank 0 encodes; every rank gets the embeddings (shapes first, then the tensors)."""
    prompts = encode_here() if dist.get_rank() == 0 else None
    shapes = [None if prompts is None else [None if e is None else [(t.shape, t.dtype) for t in e] for e in prompts]]
    dist.broadcast_object_list(shapes, src=0)
    out = []
    for index, entry in enumerate(shapes[0]):
        if entry is None:
            out.append(None)
            continue
        tensors = [prompts[index][j].to(device).contiguous() if prompts is not None else
                   torch.empty(shape, dtype=dtype, device=device) for j, (shape, dtype) in enumerate(entry)]
        for tensor in tensors:
            dist.broadcast(tensor, src=0)
        out.append(TextEmbeddings(*tensors))
    return out[0], out[1]
