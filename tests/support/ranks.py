"""Starting real torch.distributed ranks for a test: one Python process per rank running a script of
tests/distributed/ that joins a gloo group through a file and writes what it saw as JSON."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from ltx2_core.parallel.launch import leave

HERE = Path(__file__).resolve().parents[1] / "distributed"


def run_ranks(script: str, world: int, tmp_path: Path, *args: str) -> list[dict]:
    """Starts `world` processes of `script` (rank, world, init file, *args, output file) and reads their JSON."""
    init = tmp_path / "init"
    outs = [tmp_path / f"rank{rank}.json" for rank in range(world)]
    procs = [subprocess.Popen([sys.executable, str(HERE / script), str(rank), str(world), str(init), *args,
                               str(outs[rank])], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank in range(world)]
    logs = []
    for proc in procs:
        try:
            logs.append(proc.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            pytest.fail("a rank hung")
    assert all(proc.returncode == 0 for proc in procs), "\n".join(logs)[-4000:]
    return [json.loads(out.read_text()) for out in outs]


@contextlib.contextmanager
def joined(rank: int, world: int, init_file: str) -> Iterator[None]:
    """In a rank script: this process as `rank` of a gloo group (one thread, no autograd) for the duration."""
    torch.set_grad_enabled(False)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        yield
    finally:
        leave()
