"""One request must never sink the server: on a CPU server whose process may allocate a bounded amount (`prlimit
--data`, conftest's `limited_comfyui`), the issue's in-range request (8192x8192, 1441 frames, every value within the
widgets' maxima) is refused with its numbers before anything is allocated, and the server goes on answering and
running prompts. On main LTX-2 Empty Latent allocated 6 GB unchecked (here: the allocator's "can't allocate
memory"; on a machine without the limit the kernel killed the server at 16-17 GB)."""

from __future__ import annotations

from .conftest import DATA_LIMIT
from .prompts import answers, ended, queue, workflow

HUGE = {"width": 8192, "height": 8192, "frames": 1441}
LIMIT = f"the process's RLIMIT_DATA limit of {DATA_LIMIT / 1e9:.1f} GB"


def test_the_issues_request_is_refused_with_its_numbers_and_the_server_runs_on(limited_comfyui):
    server = limited_comfyui
    for name, node in (("ltx2_t2v_one_stage", "LTX2EmptyLatent"), ("ltx2_generate_two_stage", "LTX2Generate")):
        graph = workflow(name, {"4": HUGE})
        assert graph["4"]["class_type"] == node
        status, answer = queue(server, graph)
        assert status == 200, answer  # every value is within the stated ranges: it is queued
        end = ended(server, answer["prompt_id"], timeout=300)
        assert end.status == "error" and end.exception_type.endswith("MemoryPlanError"), end
        # two-stage makes its first latent at half size (1.5 GB), one-stage at full size (6.1 GB)
        assert end.message.startswith("8192x8192, 1441 frames needs ") and "of RAM while making the latent (the " \
            "empty latent " in end.message, end
        assert f"is free ({LIMIT}), " in end.message and "would fit; lower the frames, width or height" in \
            end.message, end
        assert answers(server)
    small = workflow("ltx2_t2v_one_stage", {"4": {"width": 96, "height": 64, "frames": 9}, "6": {"steps": 2}})
    status, answer = queue(server, small)
    assert status == 200 and ended(server, answer["prompt_id"], timeout=300).status == "success"
