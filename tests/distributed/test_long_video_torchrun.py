"""A long clip (`--duration` beyond one `--window`) under torchrun (2 ranks, gloo, the demo model): every rank runs
the same window loop, the stages spread over the ranks, rank 0 alone decodes; the clip equals one process's
(frames and waveform within 1e-4 before encoding)."""

from __future__ import annotations

import pytest
import torch
from distributed.test_torchrun import _generate

LONG = ("--version", "2.0", "--width", "64", "--height", "64", "--duration", "1", "--window", "17", "--overlap", "8",
        "--window-prompt", "a wave", "--window-prompt", "a gull")  # 25 frames: 2 windows


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    return _generate(tmp_path_factory.mktemp("single"), "single", *LONG)


@pytest.mark.parametrize("flags", [("--sp", "2"), ("--cfg-parallel", "2")], ids=["sp2", "cfg2"])
def test_a_long_clip_on_two_ranks_is_what_one_process_writes(single, tmp_path, flags):
    assert single["frames"].shape[0] == 25
    spread = _generate(tmp_path, "spread", *LONG, *flags, ranks=2)
    for name in ("frames", "waveform"):
        torch.testing.assert_close(spread[name], single[name], atol=1e-4, rtol=0)
