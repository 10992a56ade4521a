"""The multi-GPU layout node: its JSON value parsed and checked when the workflow is queued."""

from __future__ import annotations

import pytest

from ltx2_core.parallel import ParallelConfig, ParallelConfigError
from nodes.parallel import LTX2ParallelConfig, parse


def test_the_layout_value_becomes_a_checked_parallel_config():
    (parallel,) = LTX2ParallelConfig().make('{"cfg": 2, "sp": 2, "tp": 1}', 4)
    assert parallel.layout == ParallelConfig(2, 2, 1) and parallel.attach is None
    (parallel,) = LTX2ParallelConfig().make('{"cfg": 2}', 4, attach=" gpu-box:29600 ")
    assert parallel.attach == "gpu-box:29600"
    assert parse("{}") == ParallelConfig()


@pytest.mark.parametrize("layout, passes, message", [
    ("not json", 4, "layout must be JSON"),
    ('{"cfg": 2}', 1, "cfg 2 exceeds the 1 guidance passes"),
    ('{"sp": 3}', 4, "tp·sp = 3 must divide the 32 attention heads"),
    ('{"tp": 0}', 4, "integers ≥ 1"),
])
def test_bad_layouts_are_refused_when_queued(layout, passes, message):
    assert message in LTX2ParallelConfig.VALIDATE_INPUTS(layout, passes)
    with pytest.raises(ParallelConfigError):
        LTX2ParallelConfig().make(layout, passes)


def test_linked_or_good_values_pass_validation():
    assert LTX2ParallelConfig.VALIDATE_INPUTS() is True
    assert LTX2ParallelConfig.VALIDATE_INPUTS('{"cfg": 2, "sp": 1, "tp": 1}', 4) is True


def test_an_attach_address_is_checked_when_queued(monkeypatch):
    monkeypatch.delenv("LTX2_WORKERS_KEY", raising=False)
    assert "HOST:PORT" in LTX2ParallelConfig.VALIDATE_INPUTS('{"cfg": 2}', 4, attach="gpu-box")
    assert "set LTX2_WORKERS_KEY" in LTX2ParallelConfig.VALIDATE_INPUTS('{"cfg": 2}', 4, attach="gpu-box:29600")
    monkeypatch.setenv("LTX2_WORKERS_KEY", "secret")
    # the workers torchrun starts elsewhere are not bounded by this machine's GPUs
    assert LTX2ParallelConfig.VALIDATE_INPUTS('{"cfg": 2, "sp": 4}', 4, attach="gpu-box:29600") is True
