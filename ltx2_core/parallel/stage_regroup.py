"""A cfg-parallel layout whose ranks regroup per stage: a stage with fewer guidance passes than cfg ranks (the
distilled refinement of a two-stage run: 1 pass) would run whole on every cfg rank, the same forward computed cfg
times over; instead its cfg × sp ranks split its video tokens as one sequence-parallel group (Ulysses over cfg·sp
ranks), and the next guided stage goes back to the cfg layout. No weight moves: cfg and sp ranks hold the same
blocks (the tensor-parallel shards, whose groups are the same ranks in both layouts, stay as loaded).

The switch happens where a stage's passes are decided, before its run is prepared (`denoise.guided_setup` calls
`arrange`), so the positional tables are cut for the layout the stage runs in. What the cost model predicts for it:
docs/performance.md ("per-stage pair").
"""

from __future__ import annotations

import torch.distributed as dist

from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.parallel.cfg_parallel import CfgParallel
from ltx2_core.parallel.sequence_parallel import sequence_group, sequence_parallel, single_sequence
from ltx2_core.sampling.denoise import PassRunner, batched_passes
from ltx2_core.types import PassPerturbation, RunConstants


class StageRegroup:
    """RunnerFactory: `cfg`'s passes split over its ranks where a stage has at least as many passes as cfg ranks
    (the video tokens over `sp_group`, None: not split); otherwise every pass on every rank with the video tokens
    split over `merged` (the cfg and sp ranks of this rank's tensor-parallel position together)."""

    def __init__(self, cfg: CfgParallel, sp_group: dist.ProcessGroup | None, merged: dist.ProcessGroup) -> None:
        self.cfg, self.sp_group, self.merged = cfg, sp_group, merged
        self.regrouped = False  # the current stage runs in the merged layout

    def arrange(self, model: LTX2Transformer, passes: tuple[str, ...]) -> None:
        """Before a stage's run is prepared: the layout for its `passes`, set on `model`."""
        self.regrouped = len(passes) < self.cfg.size
        group = self.merged if self.regrouped else self.sp_group
        if sequence_group(model) is group:
            return
        if group is None:
            single_sequence(model)
        else:
            sequence_parallel(model, group)

    def __call__(self, model: LTX2Transformer, run: RunConstants, passes: tuple[str, ...],
                 perturbations: list[PassPerturbation]) -> PassRunner:
        if self.regrouped:
            return batched_passes(model, run, passes, perturbations, slice(0, len(passes)))
        return self.cfg(model, run, passes, perturbations)
