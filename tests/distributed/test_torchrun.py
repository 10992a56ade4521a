"""`python -m ltx2_core generate` under torchrun (2 ranks, gloo, the demo model): one generation spread over the
ranks writes what one process writes (frames and waveform within 1e-4 before encoding); rank 0 alone writes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]
GENERATE = ["-m", "ltx2_core", "generate", "--steps", "2", "--no-progress"]


def _generate(tmp_path: Path, name: str, *flags: str, ranks: int = 1,
              text: str = "a whole replica per rank, the prompts encoded on different ranks",
              said: list[str] | None = None) -> dict[str, torch.Tensor]:
    tensors = str(tmp_path / f"{name}.safetensors")
    out = [*GENERATE, *flags, "--output", str(tmp_path / f"{name}.mp4"), "--tensors", tensors]
    launcher = [sys.executable] if ranks == 1 else [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                                    "--nproc-per-node", str(ranks)]
    run = subprocess.run([*launcher, *out], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert run.stdout.count("wrote ") == 1  # rank 0 alone decodes and writes
    # the demo's Gemma fits every rank: the positive and negative prompts are encoded on different ranks (`text`: the
    # line of the text encoder's layout expected)
    assert ranks == 1 or f"text encoder: {text}" in run.stdout, run.stdout[-2000:]
    if said is not None:
        said.append(run.stdout)
    return load_file(tensors)


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    return _generate(tmp_path_factory.mktemp("single"), "single")


@pytest.mark.parametrize("flags", [("--sp", "2"), ("--cfg-parallel", "2"), ("--tp", "2")], ids=["sp2", "cfg2", "tp2"])
def test_two_ranks_write_what_one_process_writes(single, tmp_path, flags):
    spread = _generate(tmp_path, "spread", *flags, ranks=2)
    for name in ("frames", "waveform"):
        torch.testing.assert_close(spread[name], single[name], atol=1e-4, rtol=0)


def test_a_bad_layout_under_torchrun_is_reported_once_by_rank_zero(tmp_path):
    """Every rank finds it; rank 0 alone says it, each problem once (the tiny model's video and audio heads are
    both 2)."""
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          *GENERATE, "--sp", "4", "--output", str(tmp_path / "x.mp4")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    assert run.stderr.count("error: invalid parallel layout") == 1, run.stderr[-3000:]
    assert "cfg 1 × sp 4 × tp 1 needs 4 ranks, but 2 were started" in run.stderr
    assert run.stderr.count("must divide the 2 attention heads") == 1
    assert not list(tmp_path.iterdir())


def test_a_text_pipeline_rank_reads_only_its_part_of_gemma(tmp_path, tiny_checkpoints):
    """Files (the tiny LTX-2.3 bundle, a tiny Gemma 3 with a wide MLP so that its weights outweigh 1,024 tokens'
    hidden states) and a --memory-budget a whole Gemma does not fit: the layout planned from the headers is a
    pipeline, each rank reads only its layer (its bytes, as the plan counts them, below the whole), and the clip is
    one process's (within 1e-4)."""
    from support.gemma import text_config_values, write_comfyui_file
    from transformers import Gemma3TextModel

    from ltx2_core.memory.text_file_bytes import text_file_bytes
    from ltx2_core.memory.text_layout import replica_bytes, stage_bytes
    from ltx2_core.model.text.gemma3 import text_config

    torch.manual_seed(0)
    gemma = Gemma3TextModel(text_config({**text_config_values(), "intermediate_size": 4096}))
    text_encoder = write_comfyui_file(tmp_path / "gemma_3_12B_it.safetensors", gemma.state_dict())
    sizes = text_file_bytes(text_encoder, tiny_checkpoints["2.3"])
    budget = (stage_bytes(sizes, 1, 2, True, 2) + replica_bytes(sizes, 1)) // 2  # a pipeline fits, a whole one not
    flags = ("--checkpoint", str(tiny_checkpoints["2.3"]), "--text-encoder", str(text_encoder), "--width", "64",
             "--height", "64", "--frames", "9")
    single, said = _generate(tmp_path, "single", *flags), []
    spread = _generate(tmp_path, "spread", *flags, "--cfg-parallel", "2", "--memory-budget", repr(budget / 2**30),
                       ranks=2, text="Gemma's layers as a pipeline over 2 ranks", said=said)
    reads = re.findall(r"text encoder on rank (\d): layers (\d)-(\d).* read, (\d+) bytes .*planned (\d+), the whole "
                       r"encoder (\d+)", said[0])
    assert sorted(r[:3] for r in reads) == [("0", "0", "0"), ("1", "1", "1")], said[0][-2000:]
    for _, _, _, read, planned, whole in reads:
        assert int(read) == int(planned) < int(whole) == sizes.whole
    for name in ("frames", "waveform"):
        torch.testing.assert_close(spread[name], single[name], atol=1e-4, rtol=0)
