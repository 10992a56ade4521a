"""One rank of the CFG-parallel test (started by tests/distributed/test_cfg_parallel.py with real gloo process
groups): runs the shared sampling case with its share of the passes and writes what it saw as JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from torch.distributed.tensor.debug import CommDebugMode  # noqa: E402

from ltx2_core.parallel.cfg_parallel import CfgParallel  # noqa: E402
from ltx2_core.sampling import guided_step, ltx2_sigmas  # noqa: E402
from support import cfg_case  # noqa: E402
from support.ranks import joined  # noqa: E402


def main(rank: int, world: int, init_file: str, guidance: str, out: str) -> None:
    with joined(rank, world, init_file):
        params = {"full": cfg_case.FULL, "three": cfg_case.THREE}[guidance]
        model = cfg_case.model()
        want = cfg_case.run(cfg_case.plan(model, params))  # the single-process run, on this rank
        plan = cfg_case.plan(model, params, runner=CfgParallel())
        got = cfg_case.run(plan)
        video, audio = cfg_case.states()
        sigmas = ltx2_sigmas(3)
        with CommDebugMode() as comm:
            guided_step(plan, video, audio, sigmas[0], sigmas[1])
        result = {"diff": max((g - w).abs().max().item() for g, w in zip(got, want)),
                  "local_passes": list(plan.runner.local.passes), "passes": list(plan.runner.passes),
                  "collectives": {str(op): count for op, count in comm.get_comm_counts().items()}}
        Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
