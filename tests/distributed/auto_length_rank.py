"""One rank of the `parallel.auto_length` test (started by tests/distributed/test_auto_length_torchrun.py with real
gloo groups): the duration head's seconds predicted across the ranks with a budget a pipeline fits, then with one
no layout fits (rank 0 alone loads the whole encoder), against the one-process prediction; writes the seconds and
which loads this rank made.

argv: rank, world, init file, the release's models folder, its conv VAE file, output."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402

from ltx2_core.cli_args import parse_args  # noqa: E402
from ltx2_core.cli_request import build_request  # noqa: E402
from ltx2_core.duration import predict_seconds  # noqa: E402
from ltx2_core.memory.text_file_bytes import text_file_bytes  # noqa: E402
from ltx2_core.model_files import ModelFiles  # noqa: E402
from ltx2_core.parallel.auto_length import predict_across  # noqa: E402
from ltx2_core.request_encoding import encode_request  # noqa: E402
from support.ranks import joined  # noqa: E402


def main(rank: int, world: int, init_file: str, models: str, vae: str, out: str) -> None:
    files = ModelFiles(models, vae=vae).resolved()
    request = build_request(parse_args(["--checkpoint", models, "--vae", vae, "--auto-duration", "0.3", "2",
                                        "--width", "64", "--height", "64"]))
    whole = text_file_bytes(files.text_encoder, files.sources(), dtype=torch.float32).whole
    loads: list[str] = []
    load_encoder, load_text = ModelFiles.load_encoder, ModelFiles.load_text
    ModelFiles.load_encoder = lambda self, *a, **k: loads.append("part" if a[2:] and a[2] else "whole") or \
        load_encoder(self, *a, **k)
    ModelFiles.load_text = lambda self, *a, **k: loads.append("text") or load_text(self, *a, **k)
    result = {}
    with joined(rank, world, init_file):
        for name, budget in (("pipeline", whole * 3 // 4), ("none fits", 1)):
            loads.clear()
            result[name] = {"seconds": predict_across(request, files, "cpu", torch.float32, budget=budget),
                            "loads": list(loads)}
    encoder, head = load_text(files, "cpu", torch.float32)  # one process's prediction
    result["one process"] = predict_seconds(head, encode_request(request, encoder, files.transformer_config())[0],
                                            False)
    Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), *sys.argv[3:7])
