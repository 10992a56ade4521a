"""One rank of the tensor-parallel test (started by tests/distributed/test_tensor_parallel.py, real gloo process
groups): the tiny transformer sharded over the ranks vs the whole model in this process; the result as JSON."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402
from torch.distributed.tensor.debug import CommDebugMode  # noqa: E402

from ltx2_core.model.transformer.config import TransformerConfig  # noqa: E402
from ltx2_core.demo import demo_inputs  # noqa: E402
from ltx2_core.model.transformer import LTX2Transformer  # noqa: E402
from ltx2_core.parallel.tensor_parallel import tensor_parallel  # noqa: E402
from support import cfg_case  # noqa: E402
from support.ranks import joined  # noqa: E402
from support.configs import RELEASED_2_3  # noqa: E402


def _bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def main(rank: int, world: int, init_file: str, out: str) -> None:
    with joined(rank, world, init_file):
        full = cfg_case.model()
        sharded = copy.deepcopy(full)
        tensor_parallel(sharded)
        want = full(*demo_inputs(full, text_tokens=7))
        with CommDebugMode() as comm:
            got = sharded(*demo_inputs(sharded, text_tokens=7))
        sampled_want = cfg_case.run(cfg_case.plan(full))
        sampled = cfg_case.run(cfg_case.plan(sharded))
        result = {
            "forward_diff": max((g - w).abs().max().item() for g, w in zip(got, want)),
            "sampling_diff": max((g - w).abs().max().item() for g, w in zip(sampled, sampled_want)),
            "collectives": {str(op): count for op, count in comm.get_comm_counts().items()},
            "blocks": full.config.num_layers, "bytes": _bytes(sharded), "full_bytes": _bytes(full),
            "block_bytes": _bytes(sharded.transformer_blocks), "full_block_bytes": _bytes(full.transformer_blocks),
        }
        with torch.device("meta"):  # the released 48-block model, shapes only
            released = LTX2Transformer(TransformerConfig.from_metadata(RELEASED_2_3, "2.3.0"))
        released_bytes = _bytes(released)
        tensor_parallel(released)
        result["released_ratio"] = _bytes(released) / released_bytes
        Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4])
