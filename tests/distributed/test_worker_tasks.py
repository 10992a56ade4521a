"""Tasks on the persistent workers (`Controller.call`): every rank runs one and joins its collectives over the
workers' group, rank 0's value comes back, what a task keeps stays across jobs, a failing rank is named, and the
workers then sample as before."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.demo import demo_models
from ltx2_core.parallel import ParallelConfig
from ltx2_core.runtime import WorkerError
from support.worker_tasks import Fails, Sleeps, SumOfRanks
from support.workers import run_on


def test_a_task_runs_on_every_rank_and_rank_0s_value_comes_back(workers):
    controller = workers(ParallelConfig(sp=2))
    total, runs, device, nothing = controller.call(SumOfRanks(0.5))
    assert float(total) == pytest.approx(0.5 * (1 + 2))  # both ranks took part in the all-reduce
    torch.testing.assert_close(device, torch.full((2,), 3.0))  # len("cpu"): the worker's own device
    assert nothing is None
    assert controller.call(SumOfRanks(1.0))[1] == runs + 1  # kept across jobs in the same worker process


def test_a_failing_task_names_its_rank_and_the_workers_start_again(workers):
    controller = workers(ParallelConfig(sp=2))
    with pytest.raises(WorkerError, match="rank 1 failed: ValueError: task failed on purpose on rank 1"):
        controller.call(Fails(1))
    models = demo_models("2.0")._replace(transformer=None)
    assert run_on(controller, models).frames.shape[0] == 9  # the next job starts the workers again and samples


def test_a_task_longer_than_the_timeout_is_no_hang(workers):
    """A task that takes longer than `timeout` (loading Gemma: minutes) succeeds: the heartbeats say the ranks live."""
    controller = workers(ParallelConfig(sp=2))
    timeout, controller.timeout = controller.timeout, 2
    try:
        assert controller.call(Sleeps(5)) == 0
    finally:
        controller.timeout = timeout
