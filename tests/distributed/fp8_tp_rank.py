"""One rank of the fp8 tensor-parallel test (tests/distributed/test_sharded_load.py): an fp8 checkpoint loaded whole
and loaded tensor-parallel (this rank's fp8 shards), their forwards, plain and with a LoRA, as JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402

from ltx2_core.demo import demo_inputs  # noqa: E402
from ltx2_core.loader import load_transformer  # noqa: E402
from ltx2_core.quant.fp8 import FP8, fp8_modules  # noqa: E402
from ltx2_core.parallel.tensor_parallel import tensor_parallel  # noqa: E402
from support.ranks import joined  # noqa: E402


def main(rank: int, world: int, init_file: str, checkpoint: str, lora: str, out: str) -> None:
    with joined(rank, world, init_file):
        result = {}
        for name, loras in (("plain", ()), ("lora", ((lora, 0.7),))):
            full = load_transformer(checkpoint, loras=loras, dtype=torch.float32)
            sharded = load_transformer(checkpoint, loras=loras, dtype=torch.float32,
                                       parallelize=lambda model: tensor_parallel(model))
            want, got = full(*demo_inputs(full, text_tokens=7)), sharded(*demo_inputs(sharded, text_tokens=7))
            result[name] = {
                "diff": max((g - w).abs().max().item() for g, w in zip(got, want)),
                "scale": max(w.abs().max().item() for w in want),
                "fp8_layers": len(fp8_modules(sharded)), "fp8_layers_whole": len(fp8_modules(full)),
                "fp8_bytes": sum(m.weight.numel() for m in fp8_modules(sharded).values()
                                 if m.weight.dtype == FP8),
                "fp8_bytes_whole": sum(m.weight.numel() for m in fp8_modules(full).values())}
        Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6])
