"""The multi-GPU layout node: its JSON value parsed and checked when the workflow is queued."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.parallel import ParallelConfig, ParallelConfigError
from nodes.parallel import MAX_CPU_WORKERS, LTX2ParallelConfig, devices_info, parse


def test_the_layout_value_becomes_a_checked_parallel_config(monkeypatch):
    monkeypatch.setenv("LTX2_WORKERS_KEY", "secret")
    (parallel,) = LTX2ParallelConfig().make('{"cfg": 2, "sp": 2, "tp": 1}', 4)
    assert parallel.layout == ParallelConfig(2, 2, 1) and parallel.attach is None
    (parallel,) = LTX2ParallelConfig().make('{"cfg": 2}', 4, attach=" gpu-box:29600 ")
    assert parallel.attach == "gpu-box:29600"
    assert parse("{}") == ParallelConfig()


@pytest.mark.parametrize("layout, message", [
    ("not json", "must be JSON like"),
    ('{"sp": 3}', "tp·sp = 3 must divide the 32 attention heads"),
    ('{"tp": 0}', "integers ≥ 1"),
    ('{"cfg": 8}', "cfg 8 exceeds the 4 guidance passes"),
    ('{"cfg": 4, "sp": 32, "tp": 1}', "64 workers can attach"),
    ('{"cfg": 2.5}', "cfg 2.5 is not a whole number"),
    ('{"cfg": 1e400}', "cfg inf is not a whole number"),
    ('{"sp": NaN}', "sp nan is not a whole number"),
    ('{"cfg": true}', "cfg True is not a whole number"),
    ('{"cfg": 2, "gpus": 2}', "'gpus' is no axis; the axes are cfg, sp, tp"),
    ('"cfg=2"', "must be a JSON object"),
])
def test_bad_layouts_are_refused_when_queued(layout, message, monkeypatch):
    """A fraction ran as its whole part, an unknown key was ignored and 1e400 failed in Python's words."""
    monkeypatch.setenv("LTX2_WORKERS_KEY", "secret")
    attach = "gpu-box:29600"  # the attach bound (64), not this machine's
    assert LTX2ParallelConfig.VALIDATE_INPUTS(layout, attach).startswith("layout: ")
    assert message in LTX2ParallelConfig.VALIDATE_INPUTS(layout, attach)
    with pytest.raises(ParallelConfigError, match=message.split(";")[0].replace(".", r"\.")):
        LTX2ParallelConfig().make(layout, 4, attach)


def test_linked_or_good_values_pass_validation():
    assert LTX2ParallelConfig.VALIDATE_INPUTS() is True
    assert LTX2ParallelConfig.VALIDATE_INPUTS('{"cfg": 2, "sp": 1, "tp": 1}') is True


def test_more_workers_than_this_machine_runs_are_refused_when_queued(monkeypatch):
    """Without a GPU at most MAX_CPU_WORKERS CPU workers, known when queued from the attach input; attached workers
    are bounded by ATTACHED_MAX; an address without a port or without the shared key is refused too."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("LTX2_WORKERS_KEY", raising=False)
    assert LTX2ParallelConfig.VALIDATE_INPUTS('{"cfg": 4}') is True
    assert "layout: cfg × sp × tp = 8 workers, but 4 CPU workers are the most without a GPU" in \
        LTX2ParallelConfig.VALIDATE_INPUTS('{"cfg": 4, "sp": 2}', "")
    assert LTX2ParallelConfig.VALIDATE_INPUTS('{"cfg": 4, "sp": 2}', None) is True  # a linked address: may attach
    assert "attach: " in LTX2ParallelConfig.VALIDATE_INPUTS('{"cfg": 4, "sp": 2}', "gpu-box")
    assert "set LTX2_WORKERS_KEY" in LTX2ParallelConfig.VALIDATE_INPUTS('{"cfg": 4, "sp": 2}', "gpu-box:29600")
    monkeypatch.setenv("LTX2_WORKERS_KEY", "secret")
    assert LTX2ParallelConfig.VALIDATE_INPUTS('{"cfg": 4, "sp": 2}', "gpu-box:29600") is True


def test_what_depends_on_the_other_inputs_is_checked_before_any_worker_starts(monkeypatch):
    """cfg within guidance_passes, this machine's bound (CPU workers without a GPU), the attach address."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ParallelConfigError, match="cfg 2 exceeds the 1 guidance passes"):
        LTX2ParallelConfig().make('{"cfg": 2}', 1)
    (parallel,) = LTX2ParallelConfig().make('{"cfg": 4}', 4)  # the CPU-worker mode: up to MAX_CPU_WORKERS
    assert parallel.layout.world_size == MAX_CPU_WORKERS == 4
    with pytest.raises(ParallelConfigError, match="8 workers, but 4 CPU workers are the most without a GPU"):
        LTX2ParallelConfig().make('{"cfg": 4, "sp": 2}', 4)
    monkeypatch.delenv("LTX2_WORKERS_KEY", raising=False)
    with pytest.raises(ValueError, match="attach: .*HOST:PORT"):
        LTX2ParallelConfig().make('{"cfg": 2}', 4, attach="gpu-box")
    with pytest.raises(ValueError, match="set LTX2_WORKERS_KEY"):
        LTX2ParallelConfig().make('{"cfg": 2}', 4, attach="gpu-box:29600")
    monkeypatch.setenv("LTX2_WORKERS_KEY", "secret")
    # the workers torchrun starts elsewhere are not bounded by this machine's devices
    (parallel,) = LTX2ParallelConfig().make('{"cfg": 2, "sp": 4}', 4, attach="gpu-box:29600")
    assert parallel.layout.world_size == 8


def test_the_devices_route_states_the_worker_bounds():
    assert devices_info() == {"devices": [], "cpu_workers_max": 4, "attached_max": 64} or torch.cuda.is_available()


def test_auto_picks_the_layout_the_cost_model_predicts_fastest_on_this_machines_gpus(monkeypatch):
    """`auto`: four H200s → the model's fastest layout for the guidance passes; no GPU → one worker; attached
    workers (their GPUs unknown here) → refused naming the fix."""
    from ltx2_core.parallel.choose import fastest_layout

    import nodes.parallel as node

    h200 = [{"index": i, "name": "NVIDIA H200", "total": 143e9, "free": 140e9} for i in range(4)]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(node, "visible_devices", lambda: h200)
    assert LTX2ParallelConfig.VALIDATE_INPUTS(" Auto ") is True
    (parallel,) = LTX2ParallelConfig().make("auto", 4)
    assert parallel.layout == fastest_layout(4, 4, 37e9, 140e9, ["NVIDIA H200"] * 4) != ParallelConfig()
    (parallel,) = LTX2ParallelConfig().make("auto", 1)  # distilled: no cfg
    assert parallel.layout.cfg == 1 and parallel.layout.world_size == 4
    monkeypatch.setenv("LTX2_WORKERS_KEY", "secret")
    assert "auto picks from this machine's GPUs" in LTX2ParallelConfig.VALIDATE_INPUTS("auto", "gpu-box:29600")
    with pytest.raises(ParallelConfigError, match="give the layout as JSON"):
        LTX2ParallelConfig().make("auto", 4, attach="gpu-box:29600")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    (parallel,) = LTX2ParallelConfig().make("auto", 4)
    assert parallel.layout == ParallelConfig()


def test_the_layout_times_route_answers_predictions_for_every_layout():
    from nodes.parallel import layout_times

    got = layout_times({"gpus": "4", "name": "NVIDIA H100 80GB HBM3"})
    assert (got["gpu"], got["link"], got["version"]) == ("H100", "nvlink4", "2.3")
    assert got["seconds"]["1,1,1,4"] > got["seconds"]["2,1,1,4"] > 0 and "1,1,1,8" not in got["seconds"]
    assert max(int(k.split(",")[0]) * int(k.split(",")[1]) * int(k.split(",")[2]) for k in got["seconds"]) == 4
    assert layout_times({"gpus": "many"})["assumed"] and layout_times({"gpus": "999"})["seconds"]
