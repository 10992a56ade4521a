"""`--frames auto` under torchrun (2 ranks, gloo, the tiny LTX-2.5 release; `parallel.auto_length`): with a
--memory-budget a whole Gemma does not fit, the early encoding for the duration head is spread as the run's is (a
pipeline: each rank reads only its layers, its planned bytes, below the whole; no rank loads Gemma whole), and the
length predicted is one process's (the head's seconds to the printed 1e-2, the same frame count)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ltx2_core import ModelFiles
from ltx2_core.cli_args import parse_args
from ltx2_core.cli_request import build_request
from ltx2_core.duration import predict_seconds, with_length
from ltx2_core.request_encoding import encode_request
from ltx2_core.memory.text_file_bytes import text_file_bytes
from support.gemma4 import gemma4_config, write_gemma4_file
from support.ranks import run_ranks
from support.release25 import write_release25

ROOT = Path(__file__).resolve().parents[2]
PREDICTED = re.compile(r"duration head: ([\d.]+) s predicted -> (\d+) frames")
READ = re.compile(r"text encoder on rank (\d): layers (\d+)-(\d+).* read, (\d+) bytes .*planned (\d+), the whole "
                  r"encoder (\d+)")


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The tiny release with a Gemma 4 of a wide MLP, so that its weights outweigh the prompts' hidden states."""
    from ltx2_core.model.text.gemma4 import GEMMA4

    paths = write_release25(tmp_path_factory.mktemp("release") / "models")
    config = gemma4_config(intermediate_size=4096)
    torch.manual_seed(0)
    state = {k: 0.3 * torch.randn(v.shape) for k, v in GEMMA4.build(GEMMA4.text_values(config, "test")).state_dict()
             .items()}
    write_gemma4_file(paths["text_encoder"], config=config, state=state)
    return paths


def test_the_early_encoding_is_spread_and_predicts_one_process_length(release, tmp_path):
    files = ModelFiles(str(release["dev"].parent.parent), vae=str(release["conv_vae"])).resolved()
    sizes = text_file_bytes(files.text_encoder, files.sources(), dtype=torch.float32)
    budget = sizes.whole * 3 // 4  # a whole Gemma does not fit a rank; half its layers do
    flags = ["--checkpoint", str(release["dev"].parent.parent), "--vae", str(release["conv_vae"]), "--auto-duration",
             "0.3", "2", "--width", "64", "--height", "64", "--steps", "1", "--dtype", "float32", "--no-progress"]
    request = build_request(parse_args([*flags, "--output", str(tmp_path / "single.mp4")]))
    encoder, head = files.load_text("cpu", torch.float32)  # one process's early encoding (`predict_clip_length`)
    seconds = predict_seconds(head, encode_request(request, encoder, files.transformer_config())[0], False)
    single = (f"{seconds:.2f}", str(with_length(request, seconds).frames))
    logs = tmp_path / "logs"  # each rank's stdout in a file of its own: no two ranks' lines mixed
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          "--log-dir", str(logs), "--redirects", "1", "-m", "ltx2_core", "generate", *flags,
                          "--cfg-parallel", "2", "--memory-budget", repr(budget / 2**30), "--output",
                          str(tmp_path / "spread.mp4")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    said = {path.parent.name: path.read_text() for path in logs.rglob("stdout.log")}
    assert run.returncode == 0 and sorted(said) == ["0", "1"], str(said)[-2000:] + run.stderr[-3000:]
    assert PREDICTED.findall(said["0"]) == [single] and not PREDICTED.findall(said["1"])  # rank 0 says it, once
    assert "Gemma's layers as a pipeline over 2 ranks" in said["0"]
    for rank, out in said.items():
        reads = READ.findall(out)
        # its part read twice: for the duration head, then for the run (the layout planned the same way)
        assert [r[0] for r in reads] == [rank, rank], out[-2000:]
        for _, start, end, read, planned, whole in reads:
            assert int(read) == int(planned) < int(whole) == sizes.whole


def test_every_rank_gets_rank_0s_seconds_and_rank_0_alone_loads_where_no_layout_fits(release, tmp_path):
    """`predict_across` on 2 gloo ranks: with a budget a pipeline fits, each rank loads its part (no whole encoder,
    no `load_text`); with one nothing fits (the same verdict on both), rank 0 alone loads the whole encoder as one
    process does and rank 1 loads nothing; both ranks get the same seconds, one process's (≤ 1e-5 s)."""
    results = run_ranks("auto_length_rank.py", 2, tmp_path, str(release["dev"].parent.parent),
                        str(release["conv_vae"]))
    assert [r["pipeline"]["loads"] for r in results] == [["part"], ["part"]]
    assert [r["none fits"]["loads"] for r in results] == [["text"], []]
    for case in ("pipeline", "none fits"):
        assert results[0][case]["seconds"] == results[1][case]["seconds"]  # rank 0's, broadcast: the same float
        assert abs(results[0][case]["seconds"] - results[0]["one process"]) <= 1e-5, results[0]
