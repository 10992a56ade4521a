"""One rank of the per-stage regroup test (tests/distributed/test_stage_regroup.py, real gloo groups): the tiny
four-head transformer under a cfg layout finished by `launch.finish`, sampling a guided stage (4 passes: cfg splits
them), then an unguided one (1 pass: the cfg and sp ranks split its tokens), then a guided one again; each against
the whole model in this process, with the collectives each stage ran and whether any weight moved."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402

from layout_rank import four_heads  # noqa: E402
import torch.distributed._functional_collectives as functional  # noqa: E402

import ltx2_core.parallel.cfg_parallel as cfg_module  # noqa: E402
import ltx2_core.parallel.sequence_parallel as sp_module  # noqa: E402
from ltx2_core.parallel import ParallelConfig  # noqa: E402
from ltx2_core.parallel.launch import finish  # noqa: E402
from ltx2_core.parallel.mesh import device_mesh  # noqa: E402
from ltx2_core.parallel.sequence_parallel import sequence_group  # noqa: E402
from ltx2_core.parallel.stage_regroup import StageRegroup  # noqa: E402
from ltx2_core.sampling import GuidanceParams  # noqa: E402
from support import cfg_case  # noqa: E402
from support.ranks import joined  # noqa: E402

class Counted:
    """A module's `funcol` (functional collectives) that counts the calls of each by name."""

    def __init__(self, inner) -> None:
        self.inner, self.counts = inner, {}

    def __getattr__(self, name: str):
        function = getattr(self.inner, name)

        def counted(*args, **kwargs):
            self.counts[name] = self.counts.get(name, 0) + 1
            return function(*args, **kwargs)
        return counted


STAGES = (("guided", cfg_case.FULL), ("unguided", (GuidanceParams(), GuidanceParams())), ("guided again", cfg_case.FULL))


def main(rank: int, world: int, init_file: str, shape: str, out: str) -> None:
    with joined(rank, world, init_file):
        layout = ParallelConfig(*(int(n) for n in shape.split("x")))
        full = four_heads("2.3")
        model = copy.deepcopy(full)
        runner = finish(model, device_mesh(layout, "cpu"), layout).runner
        pointers = [p.data_ptr() for p in model.parameters()]
        result = {"regroups": isinstance(runner, StageRegroup), "stages": {}}
        for name, guidance in STAGES:
            want = cfg_case.run(cfg_case.plan(full, guidance))
            sp_module.funcol = cfg_module.funcol = comm = Counted(functional)
            got = cfg_case.run(cfg_case.plan(model, guidance, runner=runner))
            group = sequence_group(model)
            result["stages"][name] = {
                "diff": max((g - w).abs().max().item() for g, w in zip(got, want)),
                "split_over": None if group is None else torch.distributed.get_world_size(group),
                "collectives": comm.counts}
        result["weights_moved"] = pointers != [p.data_ptr() for p in model.parameters()]
        Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
