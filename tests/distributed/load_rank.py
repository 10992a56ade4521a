"""One rank of the sharded-load test (tests/distributed/test_sharded_load.py): the checkpoint loaded whole and loaded
tensor-parallel, with what each read from the file, as JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


import ltx2_core.loader.safetensors_file as safetensors_file  # noqa: E402
from ltx2_core.loader import load_transformer  # noqa: E402
from ltx2_core.parallel.tensor_parallel import tensor_parallel  # noqa: E402
from support.ranks import joined  # noqa: E402


class CountingOpen:
    """safe_open, counting the bytes of every tensor and slice read (transformer blocks apart)."""

    read = {"blocks": 0, "all": 0}

    def __init__(self, *args, **kwargs):
        self.inner = safetensors_file.REAL_SAFE_OPEN(*args, **kwargs)

    def __enter__(self):
        self.file = self.inner.__enter__()
        return self

    def __exit__(self, *exc):
        return self.inner.__exit__(*exc)

    def _count(self, name, tensor):
        size = tensor.numel() * tensor.element_size()
        CountingOpen.read["all"] += size
        CountingOpen.read["blocks"] += size if ".transformer_blocks." in name else 0
        return tensor

    def get_tensor(self, name):
        return self._count(name, self.file.get_tensor(name))

    def get_slice(self, name):
        counter = self

        class Slice:
            def __getitem__(self, index):
                return counter._count(name, counter.file.get_slice(name)[index])

        return Slice()


def load(path: str, loras, parallel: bool):
    CountingOpen.read = {"blocks": 0, "all": 0}
    shards = {}

    def parallelize(model):
        shards.update(tensor_parallel(model))
        return shards

    model = load_transformer(path, loras=loras, parallelize=parallelize if parallel else None)
    return model, shards, dict(CountingOpen.read)


def main(rank: int, world: int, init_file: str, checkpoint: str, lora: str, out: str) -> None:
    safetensors_file.REAL_SAFE_OPEN = safetensors_file.safe_open
    safetensors_file.safe_open = CountingOpen
    with joined(rank, world, init_file):
        result = {}
        for name, loras in (("plain", ()), ("lora", ((lora, 0.7),))):
            full, _, full_read = load(checkpoint, loras, parallel=False)
            sharded, shards, sharded_read = load(checkpoint, loras, parallel=True)
            whole, part = full.state_dict(), sharded.state_dict()
            result[name] = {
                "shards": len(shards), "keys_equal": set(whole) == set(part),
                "diff": max((part[key] - (shards[key].of(value) if key in shards else value)).abs().max().item()
                            for key, value in whole.items()),
                "block_read_ratio": sharded_read["blocks"] / full_read["blocks"],
                "read_ratio": sharded_read["all"] / full_read["all"]}
        Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6])
