"""What an API caller of a real ComfyUI meets: a problem reported once, on the input at fault, when queued; every
limit the UI states enforced (nothing runs); file inputs that reach only the models folders, with errors that echo
nothing of the disk; clear messages for the odd values (null, a number, a lone surrogate)."""

from __future__ import annotations

import json
import time

import pytest

from .conftest import BAD_GGUF, ROOT, TINY
from .prompts import queue as _post
from .prompts import workflow as _workflow

API = ROOT / "example_workflows" / "api"
SMALL = {"4": {"width": 96, "height": 64, "frames": 9}, "6": {"steps": 2}}


def _errors(answer: dict, node_id: str) -> list[tuple[str, str]]:
    return [(e.get("extra_info", {}).get("input_name"), f"{e['message']}: {e['details']}")
            for e in answer["node_errors"].get(node_id, {}).get("errors", [])]


GENERATE = {"4": {"width": 128, "height": 64, "frames": 9, "steps": 2}}
ONCE = [  # workflow, node, input at fault, value, a word of the message
    ("ltx2_generate_two_stage", "4", "frames", 16, "8k+1"),
    ("ltx2_generate_two_stage", "4", "frames", 1449, "maximum 1441"),
    ("ltx2_generate_two_stage", "4", "width", 16384, "max of 8192"),
    ("ltx2_generate_two_stage", "4", "width", 2**31, "max of 8192"),
    ("ltx2_generate_two_stage", "4", "width", "wide", "INT"),
    ("ltx2_generate_two_stage", "4", "mode", "bogus", "not in list"),
    ("ltx2_t2v_one_stage", "4", "frames", 16, "8k+1"),
    ("ltx2_t2v_one_stage", "6", "sigmas", "1.0, nan, 0.0", "finite"),
    ("ltx2_t2v_one_stage", "6", "sigmas", ", ".join(str(1 - i / 2000) for i in range(2001)), "at most 201"),
    ("ltx2_t2v_one_stage", "3", "prompt", "a cat \ud800", "lone surrogate"),
    ("ltx2_t2v_two_gpus", "10", "guidance_passes", 5, "max of 4"),
    ("ltx2_t2v_two_gpus", "10", "guidance_passes", 0, "min of 1"),
    ("ltx2_t2v_two_gpus", "10", "layout", json.dumps({"cfg": 10**9}), "exceeds the 4 guidance passes"),
    ("ltx2_t2v_one_stage", "1", "ckpt_name", 5, "pick a file from models/checkpoints"),
    ("ltx2_t2v_one_stage", "1", "ckpt_name", TINY["misplaced"], "is a text encoder file"),
    ("ltx2_gguf_distilled", "1", "transformer", BAD_GGUF["truncated"], "truncated or damaged: download it again"),
    ("ltx2_gguf_distilled", "1", "transformer", BAD_GGUF["flux"], "another model family (architecture 'flux')"),
]


@pytest.mark.parametrize("workflow, node_id, at_fault, value, word", ONCE,
                         ids=[f"{w[5:]}-{i}-{str(v)[:12]}" for w, _, i, v, _ in ONCE])
def test_a_problem_is_refused_when_queued_once_on_the_input_at_fault(comfyui, workflow, node_id, at_fault, value,
                                                                    word):
    base = GENERATE if workflow == "ltx2_generate_two_stage" else SMALL
    status, answer = _post(comfyui, _workflow(workflow, {**base, node_id: {
        **base.get(node_id, {}), at_fault: value}}))
    assert status == 400, answer
    errors = _errors(answer, node_id)
    assert [name for name, _ in errors] == [at_fault], errors
    assert word in errors[0][1], errors
    assert "Traceback" not in json.dumps(answer) and "TypeError" not in json.dumps(answer)


@pytest.fixture(scope="module")
def foreign(tmp_path_factory):
    """A Hugging Face-like model folder outside every models folder, with a tell-tale config."""
    folder = tmp_path_factory.mktemp("outside") / "private-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "secret_model_type_xyz"}))
    (folder / "weights.safetensors").write_bytes(b"\0" * 16)
    return folder


@pytest.mark.parametrize("node_id, name, value", [
    ("2", "text_encoder", "ABS"),
    ("2", "text_encoder", "../../outside/private-model"),
    ("2", "text_encoder", "../../../../../../../../etc"),
    ("1", "ckpt_name", "ABS/weights.safetensors"),
    ("1", "ckpt_name", "../../../../../../../../etc/passwd"),
    ("1", "ckpt_name", "/etc/passwd"),
])
def test_file_inputs_reach_only_the_models_folders_and_echo_nothing(comfyui, foreign, node_id, name, value):
    value = value.replace("ABS", str(foreign))
    status, answer = _post(comfyui, _workflow("ltx2_t2v_one_stage", {**SMALL, node_id: {name: value}}))
    assert status == 400, answer
    errors = _errors(answer, node_id)
    assert [input_name for input_name, _ in errors] == [name], errors
    text = json.dumps(answer).replace(json.dumps(value)[1:-1], "")  # the caller's own value may come back
    for leak in ("secret_model_type_xyz", "config.json", "weights.safetensors", "passwd", str(foreign.parent)):
        assert leak not in text, (leak, text)
    log = comfyui.log.read_text()
    assert "secret_model_type_xyz" not in log  # the foreign config was never read


def test_a_null_file_name_and_a_lone_surrogate_in_the_generate_prompt_give_clear_messages(comfyui):
    for workflow, node_id, inputs, message in (
            ("ltx2_t2v_one_stage", "1", {"ckpt_name": None}, "pick a file from models/checkpoints"),
            ("ltx2_generate_two_stage", "4", {**GENERATE["4"], "prompt": "a cat \ud800"}, "lone surrogate")):
        status, answer = _post(comfyui, _workflow(workflow, {**(SMALL if node_id == "1" else {}), node_id: inputs}))
        assert status == 200, answer  # known only when the node runs (a null is what a link looks like when queued)
        error = _wait(comfyui, answer["prompt_id"])
        assert error["node_id"] == node_id and message in error["exception_message"], error
        assert error["exception_type"].endswith("ValueError")


def _wait(server, prompt_id: str, timeout: float = 300) -> dict | None:
    """The execution_error of a finished prompt (None when it succeeded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        history = server.get(f"/history/{prompt_id}").get(prompt_id)
        if history and history["status"].get("completed") is not None and history["status"]["status_str"]:
            if history["status"]["status_str"] == "success":
                return None
            return next(data for kind, data in history["status"]["messages"] if kind == "execution_error")
        time.sleep(0.5)
    pytest.fail(f"prompt {prompt_id} did not finish within {timeout:g} s")


def test_the_devices_route_states_the_cpu_worker_mode(comfyui):
    answer = comfyui.get("/ltx2/devices")
    assert answer == {"devices": [], "cpu_workers_max": 4, "attached_max": 64}
    status, answer = _post(comfyui, _workflow("ltx2_t2v_two_gpus", {**SMALL, "10": {"layout": '{"cfg": 4, "sp": 2}'}}))
    assert status == 200, answer  # 8 workers pass the queue-time bound (attach may be set); the run refuses them
    error = _wait(comfyui, answer["prompt_id"])
    assert error["node_id"] == "10" and "4 CPU workers are the most without a GPU" in error["exception_message"]

