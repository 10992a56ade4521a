"""CFG-parallel: the guidance passes of a step spread over devices, each device batching its share in one forward.

Two runners plug into `guided_setup(..., runner=...)` (the PassRunner seam of `ltx2_core.sampling.denoise`):

* `CfgParallel(group)`: one process per device (torch.distributed); each rank runs its contiguous share of the
  passes and ONE all-gather per step (video and audio predictions flattened together) returns every pass's
  prediction, in pass order, on every rank. Shares that differ in size are padded to the largest for the gather and
  the padding rows are dropped by a fixed index (no host sync).
* `ReplicatedCfg(replicas)`: one process, one model replica per local device: each device's share is queued in turn
  (CUDA runs them concurrently), inputs and predictions move device to device; no worker processes and no NCCL, so it
  also works where NCCL does not (Windows).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.sampling.denoise import BatchedPasses, PassRunner, batched_passes
from ltx2_core.types import PassPerturbation, RunConstants, StreamInput


def shares(passes: int, parts: int) -> list[slice]:
    """`passes` split into `parts` contiguous shares, sizes differing by at most one (larger first)."""
    base, extra = divmod(passes, parts)
    bounds = [0]
    for index in range(parts):
        bounds.append(bounds[-1] + base + (index < extra))
    return [slice(start, stop) for start, stop in zip(bounds, bounds[1:])]


def _split(stream: StreamInput, part: slice, device: torch.device | None = None) -> StreamInput:
    return StreamInput(*(t[part] if device is None else t[part].to(device, non_blocking=True) for t in stream))


class GatheredPasses:
    """This rank's share as one forward, then one all-gather of every pass's prediction (pass order)."""

    def __init__(self, local: BatchedPasses, passes: tuple[str, ...], parts: list[slice], rank: int,
                 group: dist.ProcessGroup) -> None:
        self.local, self.passes, self.mine, self.group = local, passes, parts[rank], group
        self.rows = max(p.stop - p.start for p in parts)
        device = next(local.model.parameters()).device
        order = [index * self.rows + offset for index, part in enumerate(parts)
                 for offset in range(part.stop - part.start)]
        self.order = torch.tensor(order, device=device)  # set-up: the valid gathered rows, in pass order

    def __call__(self, video: StreamInput, audio: StreamInput) -> tuple[torch.Tensor, torch.Tensor]:
        video_x0, audio_x0 = self.local(_split(video, self.mine), _split(audio, self.mine))
        flat = torch.cat([video_x0.flatten(1), audio_x0.flatten(1)], dim=1)
        if flat.shape[0] < self.rows:
            flat = torch.cat([flat, flat.new_zeros(self.rows - flat.shape[0], flat.shape[1])])
        gathered = funcol.all_gather_single(flat.contiguous(), 0, self.group)
        rows = gathered.index_select(0, self.order)
        split = video_x0[0].numel()
        return (rows[:, :split].reshape(len(self.passes), *video_x0.shape[1:]),
                rows[:, split:].reshape(len(self.passes), *audio_x0.shape[1:]))


class CfgParallel:
    """RunnerFactory: the passes spread over the ranks of `group` (default: all ranks)."""

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        self.group = group or dist.group.WORLD
        self.rank, self.size = dist.get_rank(self.group), dist.get_world_size(self.group)

    def __call__(self, model: LTX2Transformer, run: RunConstants, passes: tuple[str, ...],
                 perturbations: list[PassPerturbation]) -> PassRunner:
        if self.size > len(passes):  # a stage with fewer passes (the unguided refinement): whole on every rank
            return batched_passes(model, run, passes, perturbations, slice(0, len(passes)))
        parts = shares(len(passes), self.size)
        local = batched_passes(model, run, passes, perturbations, parts[self.rank])
        return GatheredPasses(local, passes, parts, self.rank, self.group)


def _to(value, device: torch.device):
    """`value` (a tensor or a NamedTuple of them, nested; anything else, such as None or the run's `should_stop`,
    kept) on `device`."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if not isinstance(value, tuple):
        return value
    return type(value)(*(_to(item, device) for item in value))


def replicate(model: LTX2Transformer, devices: Sequence[torch.device | str]) -> list[LTX2Transformer]:
    """`model` first, then a copy on each further device (weights copied once, at set-up)."""
    return [model] + [copy.deepcopy(model).to(device) for device in devices[1:]]


class ReplicaPasses:
    """Each replica's share as one forward on its device; predictions gathered on the first device."""

    def __init__(self, runners: list[BatchedPasses], parts: list[slice], home: torch.device) -> None:
        self.runners, self.parts, self.home = runners, parts, home
        self.passes = tuple(name for runner in runners for name in runner.passes)

    def __call__(self, video: StreamInput, audio: StreamInput) -> tuple[torch.Tensor, torch.Tensor]:
        outputs = []
        for runner, part in zip(self.runners, self.parts):  # queued one after the other; devices run concurrently
            device = next(runner.model.parameters()).device
            video_x0, audio_x0 = runner(_split(video, part, device), _split(audio, part, device))
            outputs.append((video_x0.to(self.home, non_blocking=True), audio_x0.to(self.home, non_blocking=True)))
        return torch.cat([v for v, _ in outputs]), torch.cat([a for _, a in outputs])


class ReplicatedCfg:
    """RunnerFactory: the passes spread over model replicas in this process (`replicate`); replicas[0] is the
    model the plan is made for."""

    def __init__(self, replicas: Sequence[LTX2Transformer]) -> None:
        self.replicas = list(replicas)

    def __call__(self, model: LTX2Transformer, run: RunConstants, passes: tuple[str, ...],
                 perturbations: list[PassPerturbation]) -> PassRunner:
        if model is not self.replicas[0]:
            raise ValueError("plan the run for the first replica (the model the others were copied from)")
        parts = shares(len(passes), min(len(self.replicas), len(passes)))
        runners = []
        for replica, part in zip(self.replicas, parts):
            device = next(replica.parameters()).device
            runners.append(batched_passes(replica, _to(run, device), passes, perturbations, part))
        return ReplicaPasses(runners, parts, next(model.parameters()).device)
