"""A persistent worker: one process per device, holding its shard of the transformer across jobs.

Started by the `Controller` (torch.multiprocessing spawn: `ltx2_core.runtime.spawned.worker_main`), or by torchrun
on one or several machines and attached to a controller over TCP (`python -m ltx2_core.runtime --connect
HOST:PORT`, see `ltx2_core.runtime.links`); either way it talks through a `Channel` (`ltx2_core.runtime.protocol`).
It joins the group (NCCL on GPUs, gloo on the CPU), loads its shard of the transformer once (the caller upsamples
latents; what else a worker holds, a task loads when first asked), reports `Ready`, then samples stages (`StageJob`:
the latent, prompts, generator state and `Stage` in; the latent and generator state back from rank 0), or runs
tasks (`protocol.Task`: e.g. a decode spread over the group, with what the task loads kept across jobs), until it
gets `None`. An attached worker then waits for the next controller, keeping its group (and its shard, when the next
controller asks for the same one). A job's LoRA files are read once, cut to this rank's shards, and fused for that
job only. A heartbeat thread reports every HEARTBEAT seconds, so a hung rank is told from a busy one, and ends the
worker when its caller is gone.

Interrupts: the controller sets (job id, stop point) for every rank; each rank reads it on the host before every step
and every transformer block (its stop points; no device sync) and stops at the SAME point, so no rank is left inside
a collective.
"""

from __future__ import annotations

import os
import threading
import traceback
from dataclasses import replace
from typing import NamedTuple

import torch
import torch.distributed as dist
from torch.distributed.rendezvous import rendezvous

from ltx2_core.compile import compile_blocks
from ltx2_core.model.transformer.attention_select import use_attention
from ltx2_core.errors import Interrupted
from ltx2_core.loader.lora import Lora, load_lora, shard_lora
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.parallel.launch import finish, join, tensor_parallel_for
from ltx2_core.stage_samplers import LocalSampler
from ltx2_core.preview import LatentPreview
from ltx2_core.runtime.protocol import (Alive, Channel, Done, Error, Finished, Progress, Ready, StageJob, Stopped,
                                        TaskContext, WorkerSpec)

HEARTBEAT = 2.0  # seconds between a worker's "alive" messages


class _Progress:
    """Rank 0's progress callback of a job: each step, with the newest preview image that is ready (or None)."""

    def __init__(self, job: int, channel: Channel, preview: LatentPreview | None) -> None:
        self.job, self.channel, self.preview = job, channel, preview

    def __call__(self, done: int, total: int) -> None:
        image = self.preview.ready() if self.preview is not None else None
        self.channel.put(Progress(self.job, done, total, None if image is None else image.copy()))


class _StopPoints:
    """A job's `should_stop` on one rank, read before every step and every transformer block (its stop points): it
    counts them, reports the count, and says stop at the job's stop point, which is the same on every rank."""

    def __init__(self, rank: int, job: int, channel: Channel) -> None:
        self.rank, self.job, self.channel, self.count = rank, job, channel, 0

    def __call__(self) -> bool:
        self.count += 1
        self.channel.reached(self.rank, self.count)
        stop = self.channel.stop_point(self.job)
        if stop is not None and self.count > stop:  # it came too late here: this rank cannot stop with the others
            raise RuntimeError(f"the stop point {stop} reached rank {self.rank} only at point {self.count}")
        return stop == self.count


def _heartbeat(rank: int, channel: Channel, done: threading.Event) -> None:
    """Reports `alive` every HEARTBEAT seconds until `done`; exits the process when the caller is gone (killed, so
    it could not stop the workers): an orphaned worker would hold its device forever."""
    while not done.is_set():
        if not channel.connected():
            channel.abandoned()
            os._exit(1)
        channel.put(Alive(rank))
        done.wait(HEARTBEAT)


class _Loras:
    """LoRA files read once per (path, modification time), cut to this rank's shards."""

    def __init__(self, shards: dict) -> None:
        self.shards, self.cache = shards, {}

    def __call__(self, files: tuple[tuple[str, float], ...]) -> list[tuple[Lora, float]]:
        out = []
        for path, strength in files:
            key = (path, os.stat(path).st_mtime_ns)
            if key not in self.cache:
                self.cache[key] = shard_lora(load_lora(path), self.shards)
            out.append((self.cache[key], strength))
        return out


class Loaded(NamedTuple):
    """This rank's shard of the transformer, as loaded for `spec`."""

    spec: WorkerSpec
    transformer: LTX2Transformer
    runner: object  # the CFG-parallel pass runner, or None
    shards: dict  # this rank's tensor-parallel shards (where a LoRA's updates are cut)
    device: torch.device
    kept: dict  # what tasks keep across jobs (`TaskContext.kept`)


def serve(rank: int, local_rank: int, spec: WorkerSpec, channel: Channel, loaded: Loaded | None = None
          ) -> Loaded | None:
    """Joins the group (once per process), loads this rank's shard (unless `loaded` is the shard of this spec),
    reports `ready`, then serves jobs until `None`. Returns the shard (None when loading failed)."""
    done = threading.Event()
    threading.Thread(target=_heartbeat, args=(rank, channel, done), daemon=True).start()
    try:
        if loaded is None or loaded.spec != spec:
            try:
                loaded = _load(local_rank, spec)
            except BaseException:
                channel.put(Error(rank, None, traceback.format_exc()))
                return None
        channel.put(Ready(rank, os.getpid()))
        _serve_jobs(rank, loaded, channel)
        return loaded
    finally:
        done.set()


def _load(local_rank: int, spec: WorkerSpec) -> Loaded:
    if spec.threads:
        torch.set_num_threads(spec.threads)
    torch.set_grad_enabled(False)
    device = torch.device("cuda", local_rank) if spec.device_type == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        if spec.init_file is not None:
            dist.init_process_group(backend, init_method=f"file://{spec.init_file}",
                                    rank=int(os.environ["RANK"]), world_size=spec.layout.world_size)
        else:
            _join_torchrun_group(backend)
    mesh = join(spec.layout, device)
    shards: dict = {}
    tensor_parallel = tensor_parallel_for(mesh, spec.layout)

    def parallelize(model):
        shards.update(tensor_parallel(model))
        return shards

    transformer = spec.files.load_transformer(device, spec.dtype, parallelize=parallelize if tensor_parallel else None)
    return Loaded(spec, transformer, finish(transformer, mesh, spec.layout).runner, shards, device, {})


def _join_torchrun_group(backend: str) -> None:
    """Joins the group torchrun's environment names, in this launch attempt's own part of its store: torchrun's agent
    keeps one store across `--max-restarts`, where a restarted rank that joins after its peer would read the peer's
    address of the attempt before (gloo: "Connection refused", or no group at all)."""
    store, rank, world = next(rendezvous("env://"))
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    dist.init_process_group(backend, store=dist.PrefixStore(f"ltx2/attempt{attempt}", store), rank=rank,
                            world_size=world)


def _cpu(tensor: torch.Tensor | None) -> torch.Tensor | None:
    return None if tensor is None else tensor.cpu()


def _serve_jobs(rank: int, loaded: Loaded, channel: Channel) -> None:
    loras, compiled = _Loras(loaded.shards), [False]
    while (message := channel.get()) is not None:
        job_id, job = message.job, message.work
        try:
            if isinstance(job, StageJob):
                _sample(rank, job_id, job, loaded, loras, compiled, channel)
            else:  # a task (`protocol.Task`): a spread decode, a prompt encoding
                value = job.run(TaskContext(rank, loaded.device, loaded.spec, loaded.kept))
                channel.put(Finished(job_id, value if rank == 0 else None, rank))
                del value  # e.g. a decoded video in shared memory: not held until the next job
        except Interrupted:
            if rank == 0:
                channel.put(Stopped(job_id))
        except BaseException:
            channel.put(Error(rank, job_id, traceback.format_exc()))


def _sample(rank: int, job_id: int, job: StageJob, loaded: Loaded, loras: _Loras, compiled: list[bool],
            channel: Channel) -> None:
    """One sampling stage on this rank; rank 0 sends the result. `compiled[0]`: the blocks were compiled."""
    transformer, device = loaded.transformer, loaded.device
    if job.compile and not compiled[0]:
        compile_blocks(transformer)
        compiled[0] = True
    generator = torch.Generator(device)
    generator.set_state(job.generator_state)
    preview = LatentPreview(job.preview, *job.latent.video.shape[2:]) if rank == 0 and job.preview else None
    # one rank of several: eager steps (every rank stops before the same block), all passes per forward
    sampler = LocalSampler(transformer, runner=loaded.runner, observe=preview and preview.observe,
                           should_stop=_StopPoints(rank, job_id, channel), cuda_graphs=False, one_gpu=False)
    config = transformer.config  # the backend checked here too, its choices made before the first step
    with use_attention(job.attention, device, transformer.scale_shift_table.dtype,
                       (config.video.head_dim, config.audio.head_dim)):
        latent = sampler(job.positive.to(device), None if job.negative is None else job.negative.to(device),
                         job.latent, replace(job.stage, loras=loras(job.stage.loras)), generator,
                         progress=_Progress(job_id, channel, preview) if rank == 0 else None)
    if rank == 0:
        channel.put(Done(job_id, latent.video.cpu(), _cpu(latent.audio), generator.get_state(),
                         _cpu(latent.keyframes)))
