"""A cancel (ComfyUI's interrupt flag, any `should_stop`) lands within one transformer block of a step run eagerly: the
flag is a host-side read between blocks, never a tensor read, so a step keeps zero syncs; a captured CUDA graph's
step reads it between steps only. The next run after a cancel runs whole. (On workers:
tests/distributed/test_runtime.py.)"""

from __future__ import annotations

import threading
import time

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.compile import CudaGraphStep
from ltx2_core.demo import demo_transformer
from ltx2_core.errors import Interrupted
from ltx2_core.geometry import audio_positions, video_positions
from ltx2_core.hosts import LocalHost
from ltx2_core.sampling import GuidanceParams, denoise, guided_setup, guided_step, ltx2_sigmas, noised_state
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import empty_latent, sample
from ltx2_core.types import TextEmbeddings
from support.census import OpCensus
from support.slow_model import slow_blocks

LAYERS, BLOCK = 8, 0.4  # slow blocks: a step of 8 blocks of at least 0.4 s
GUIDED = GuidanceParams(cfg=3.0, stg=1.0, stg_blocks=(1,), rescale=0.7, modality=3.0)


@pytest.fixture(scope="module")
def model():
    return demo_transformer(TransformerConfig.tiny("2.0", num_layers=LAYERS), seed=3)


def _texts(config: TransformerConfig) -> tuple[TextEmbeddings, TextEmbeddings]:
    g = torch.Generator().manual_seed(0)
    width = config.caption_channels or config.video.context_dim
    return tuple(TextEmbeddings(torch.randn(1, 6, width, generator=g), torch.randn(1, 6, width, generator=g))
                 for _ in range(2))


def _run(host: LocalHost, should_stop=None, steps: int = 3):
    positive, negative = _texts(host.config)
    stage = Stage(ltx2_sigmas(steps), video_guidance=GUIDED, audio_guidance=GUIDED)
    with host.sampler(should_stop=should_stop) as (sampler, _):
        return sampler(positive, negative, empty_latent(64, 64, 9, 24.0), stage, torch.Generator().manual_seed(5))


def test_a_cancel_lands_within_one_block_and_the_next_run_runs_whole(model):
    """The flag is set from another thread (as `POST /interrupt` sets ComfyUI's) while the second step's third block
    runs: the run stops when that block ends, not at the end of the step (5 blocks later) or of the stage."""
    host = LocalHost(model, "cpu", torch.float32)
    want = _run(host)
    cancel, started, cancelled = threading.Event(), [], []

    def press_cancel() -> None:
        cancelled.append(time.monotonic())
        cancel.set()

    def block_started(index: int) -> None:
        started.append(time.monotonic())
        if len(started) == LAYERS + 3:
            threading.Timer(BLOCK / 4, press_cancel).start()  # while the block sleeps

    handles = slow_blocks(model, BLOCK, block_started)
    try:
        with pytest.raises(Interrupted, match="before transformer block 3"):
            _run(host, cancel.is_set)
        stopped = time.monotonic()
    finally:
        for handle in handles:
            handle.remove()
    assert len(started) == LAYERS + 3 and cancelled[0] > started[-1]  # no block began after the cancel
    step = started[LAYERS] - started[0]  # the first step's time
    assert stopped - cancelled[0] < step / 2  # the block under way ended (an eighth of a step), and that was all
    got = _run(host)  # the next run: whole, and the same as before the cancel
    for a, b in zip(got[:2], want[:2]):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


class _Replayed:
    """A step that says it replays a captured CUDA graph (as `CudaGraphStep`), run eagerly here on the CPU: it
    records the run constants' `should_stop` the sampler gave it."""

    captured = True

    def __init__(self) -> None:
        self.block_checks = []

    def __call__(self, setup, *args):
        self.block_checks.append(setup.runner.run.should_stop)
        return guided_step(setup, *args)


def test_under_a_captured_graph_the_flag_is_read_between_steps_only(model):
    assert CudaGraphStep.captured  # the real captured step is taken for one
    positive, negative = _texts(model.config)
    step, reads, done = _Replayed(), [], []

    def should_stop() -> bool:
        reads.append(len(done))
        return len(done) == 2

    with pytest.raises(Interrupted, match="before step 3 of 4"):
        sample(model, positive, negative, empty_latent(64, 64, 9, 24.0), Stage(ltx2_sigmas(4)),
               torch.Generator().manual_seed(5), step=step, should_stop=should_stop,
               progress=lambda index, total: done.append(index))
    assert step.block_checks == [None, None] and reads == [0, 1, 2]  # one read per step, none inside one


def test_reading_the_flag_between_blocks_never_syncs_or_copies_host_data(model):
    """The flag is a Python call: a guided step with it read before every block keeps zero syncs and copies."""
    positive, negative = _texts(model.config)
    reads = []
    setup = guided_setup(model, positive, negative, video_positions(2, 2, 2, 24.0), audio_positions(9), GUIDED,
                         GUIDED, should_stop=lambda: reads.append(1) and False)
    g = torch.Generator().manual_seed(1)
    states = [noised_state(torch.zeros(1, tokens, 128), torch.randn(1, tokens, 128, generator=g))
              for tokens in (8, 9)]
    with OpCensus() as census:
        denoise(setup, *states, ltx2_sigmas(3), should_stop=lambda: reads.append(0) and False)
    assert census.syncs() == {}, census.syncs()
    assert census.transfers() == 0
    assert reads.count(0) == 3 and reads.count(1) == 3 * LAYERS  # before each step, before each block
