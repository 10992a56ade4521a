"""The prompt encoder on the persistent workers (`runtime.text_task`, issue 38 item 2): two gloo CPU workers load a
tiny Gemma 3 (2 layers, LTX-2.3's text path) once, spread as planned (a whole replica each, the prompts on different
ranks; or, under a small budget, Gemma's layers as a pipeline), and encode what one device encodes; released, they
hold it no more. Each worker reads only what the layout gives it (planned from the files' headers): a whole replica,
or a pipeline rank its layers alone, exactly its planned bytes and less than the whole."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.loader.sources import Sources
from ltx2_core.loader.text_weights import load_prompt_encoder
from ltx2_core.memory.text_file_bytes import text_file_bytes
from ltx2_core.memory.text_layout import stage_bytes
from ltx2_core.model.text import enhance
from ltx2_core.parallel import ParallelConfig
from ltx2_core.parallel.text_encode import text_bytes
from ltx2_core.runtime.text_task import LoadEncoder, Release, WorkerPromptEncoder
from support.gemma import write_comfyui_file
from support.worker_tasks import CountedLoad

MAX = 32  # tokens per prompt: short, as the torchrun text test
POSITIVE = "A red car drives through a rainy city at night, neon lights reflecting on the wet street."
NEGATIVE = "blurry, low quality"


@pytest.fixture(scope="module")
def text_files(tmp_path_factory, tiny_checkpoints):
    path = write_comfyui_file(tmp_path_factory.mktemp("worker_text") / "gemma_3_12B_it.safetensors")
    return str(path), Sources.bundled(tiny_checkpoints["2.3"])


@pytest.fixture(scope="module")
def here(text_files):
    """The one-device encoder and its encoding of both prompts (one batch of two)."""
    encoder = load_prompt_encoder(*text_files, max_length=MAX)
    return encoder, encoder.encode(POSITIVE, NEGATIVE)


def _close(got, want) -> None:
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=0)  # batch 1 against the batch of two: GEMM blocking


def test_the_workers_encode_as_one_device_loading_once_and_release_frees_it(workers, text_files, here):
    controller = workers(ParallelConfig(sp=2))
    load = LoadEncoder(*text_files, max_length=MAX)
    loaded, records = controller.call(CountedLoad(load))
    whole = text_bytes(here[0]).whole
    assert [r["loads"][0]["read"] for r in records] == [whole, whole]  # a replica each: each read it whole, once
    encoder = WorkerPromptEncoder(controller, load)
    assert encoder.layout.mode == "prompts" == loaded.layout.mode  # the tiny encoder fits each worker whole
    positive, negative = encoder.encode(POSITIVE, NEGATIVE)
    _close(positive, here[1][0])
    _close(negative, here[1][1])
    only, none = encoder.encode(POSITIVE)
    assert none is None
    _close(only, here[1][0])
    _close(encoder.encode_batch([NEGATIVE, POSITIVE]).select(1), here[1][0])
    # three encodes, no load since (the count is this worker process's: the shared workers may have loaded before)
    assert controller.call(load).loads == loaded.loads
    encoder.release()
    assert controller.call(Release(load)) is False  # nothing held any more
    with pytest.raises(RuntimeError, match="was released"):
        encoder.encode(POSITIVE)


def test_a_small_budget_makes_the_workers_a_pipeline_equal_to_one_device(workers, text_files, here):
    controller = workers(ParallelConfig(sp=2))
    sizes = text_file_bytes(*text_files, max_length=MAX)  # what the workers plan from: the files' headers
    assert sizes == text_bytes(here[0])
    budget = sizes.whole * 3 // 4  # no whole replica fits: Gemma's layers split over the workers
    load = LoadEncoder(*text_files, max_length=MAX, budget=budget)
    loaded, records = controller.call(CountedLoad(load))
    assert loaded.layout.mode == "pipeline" and loaded.layout.bounds == ((0, 1), (1, 2))
    for rank, ((start, end), record) in enumerate(zip(loaded.layout.bounds, records)):
        (read,) = record["loads"]  # one load, of this rank's part: no whole copy first
        planned = stage_bytes(sizes, start, end, end == len(sizes.layers), prompts=0)
        assert read["read"] == record["held"] == planned < sizes.whole, (rank, record, planned)
        assert read["read_layers"] == [start <= i < end for i in range(len(sizes.layers))], (rank, record)
    assert sum(r["held"] for r in records) == sizes.whole  # every weight read once, by one worker
    encoder = WorkerPromptEncoder(controller, load)  # finds what the workers loaded
    assert encoder.layout == loaded.layout and controller.call(load).loads == loaded.loads
    positive, negative = encoder.encode(POSITIVE, NEGATIVE)
    _close(positive, here[1][0])
    _close(negative, here[1][1])
    with pytest.raises(ValueError, match="switch enhance_prompt off"):
        enhance.enhance_prompt(encoder, POSITIVE)
    encoder.release()


def test_rank_0_enhances_a_prompt_as_one_device(workers, text_files, here, tmp_path):
    system = tmp_path / "system.txt"
    system.write_text("Rewrite the idea as one detailed paragraph.")
    encoder = WorkerPromptEncoder(workers(ParallelConfig(sp=2)), LoadEncoder(*text_files, max_length=MAX))
    got = enhance.enhance_prompt(encoder, "a cat on a beach", seed=4, system_prompt_file=system, max_new_tokens=6)
    want = enhance.enhance_prompt(here[0], "a cat on a beach", seed=4, system_prompt_file=system, max_new_tokens=6)
    assert got.token_ids and got.text == want.text and list(got.token_ids) == list(want.token_ids)
    encoder.release()
