"""The runtime's protocol: each message kind is its own picklable type, the attached workers' line carries them
as such, and a worker's stop points and progress speak through any `Channel` (a toy one here)."""

from __future__ import annotations

import pickle
from multiprocessing import Pipe

import pytest
import torch

from ltx2_core.runtime import links
from ltx2_core.runtime.protocol import (
    Alive,
    Done,
    Error,
    Finished,
    Hello,
    Note,
    Position,
    Progress,
    Ready,
    Refused,
    Run,
    StageJob,
    Stop,
    Stopped,
)
from ltx2_core.runtime.worker import _Progress, _StopPoints
from ltx2_core.sampling import Stage, ltx2_sigmas
from ltx2_core.stages import AVLatent
from ltx2_core.types import TextEmbeddings

MESSAGES = [Ready(1, 4321), Alive(0), Progress(3, 2, 8, None), Stopped(3), Error(1, None, "Traceback ..."),
            Note("refused"), Position(1, 5), Stop(3, 7), Hello(0, 2, 99, "host"), Refused("why"), Finished(4, "value"),
            Finished(4, None, 1)]


def _job() -> StageJob:
    text = TextEmbeddings(torch.zeros(1, 3, 8), torch.zeros(1, 3, 8))
    latent = AVLatent(torch.zeros(1, 128, 2, 2, 2), torch.zeros(1, 8, 5, 16), 24.0)
    stage = Stage(ltx2_sigmas(2), loras=(("lora.safetensors", 1.0),))
    return StageJob(latent, text, None, torch.Generator().get_state(), stage)


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_kind_travels_as_its_own_type(message):
    assert pickle.loads(pickle.dumps(message)) == message
    assert type(pickle.loads(pickle.dumps(message))) is type(message)


def test_the_attached_line_carries_jobs_stops_and_reports_as_typed_messages():
    controller, worker = Pipe()
    channel = links.SocketChannel(worker)
    try:
        links.send(controller, Stop(3, 2))
        links.send(controller, Run(3, _job()))
        run = channel.get()  # read in order: the stop point is known once the job is
        assert isinstance(run, Run) and run.job == 3 and run.work.stage.loras == (("lora.safetensors", 1.0),)
        done = Done(3, torch.ones(2), torch.zeros(2), torch.Generator().get_state())
        channel.reached(1, 2)
        channel.put(done)
        position, back = links.receive(controller), links.receive(controller)
        assert position == Position(1, 2) and isinstance(back, Done) and torch.equal(back.video, done.video)
        assert channel.stop_point(3) == 2 and channel.stop_point(4) is None
    finally:
        controller.close()


class _Toy:
    """A Channel in memory: what a worker says, and a stop point the test sets."""

    def __init__(self, stop: int | None = None) -> None:
        self.said, self.positions, self.stop = [], {}, stop

    def get(self):
        return None

    def put(self, message) -> None:
        self.said.append(message)

    def stop_point(self, job: int) -> int | None:
        return self.stop

    def reached(self, rank: int, points: int) -> None:
        self.positions[rank] = points

    def connected(self) -> bool:
        return True

    def abandoned(self) -> None:
        pass


def test_a_worker_counts_its_stop_points_through_any_channel_and_stops_at_the_stop_point():
    zero, one = _Toy(stop=3), _Toy(stop=3)
    points = _StopPoints(0, 7, zero), _StopPoints(1, 7, one)
    assert [[counter() for counter in points] for _ in range(3)] == [[False, False], [False, False], [True, True]]
    assert zero.positions == {0: 3} and one.positions == {1: 3}
    _Progress(7, zero, None)(1, 4)
    assert zero.said == [Progress(7, 1, 4, None)]


def test_a_stop_point_that_arrives_after_a_rank_passed_it_is_an_error_not_a_stop():
    """That rank cannot stop where the others do: it says so (the controller then starts the workers again)."""
    late = _Toy()
    counter = _StopPoints(1, 7, late)
    counter(), counter()
    late.stop = 1
    with pytest.raises(RuntimeError, match="the stop point 1 reached rank 1 only at point 3"):
        counter()
