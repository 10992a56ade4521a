"""What an API caller of a real ComfyUI meets: every problem that needs no file's content refused when queued, on
the input at fault (nothing runs); every limit the UI states enforced, NaN too; file inputs that reach only the
models folders, with errors that echo nothing of the disk; clear messages for the odd values (null, a number, a lone
surrogate)."""

from __future__ import annotations

import json

import pytest

from .conftest import BAD_GGUF, ROOT, TINY
from .prompts import queue as _post
from .prompts import workflow as _workflow

API = ROOT / "example_workflows" / "api"
SMALL = {"4": {"width": 96, "height": 64, "frames": 9}, "6": {"steps": 2}}


def _errors(answer: dict, node_id: str) -> list[tuple[str, str]]:
    return [(e.get("extra_info", {}).get("input_name"), f"{e['message']}: {e['details']}")
            for e in answer["node_errors"].get(node_id, {}).get("errors", [])]


CUSTOM = "Custom validation failed for node: "


def _at_fault(errors: list[tuple[str, str]]) -> str:
    """The one input a problem is reported on: ComfyUI's own checks name it; a VALIDATE_INPUTS failure is listed on
    every input the validator names (input_types too), each with the same message, which begins with the input at
    fault."""
    faults = {name for name, message in errors if not message.startswith(CUSTOM)}
    messages = {message.removeprefix(CUSTOM).split(" - ", 1)[1] for _, message in errors if message.startswith(CUSTOM)}
    assert len(messages) <= 1, errors
    faults |= {message.split(":", 1)[0] for message in messages}
    assert len(faults) == 1, errors
    return faults.pop()


GENERATE = {"4": {"width": 128, "height": 64, "frames": 9, "steps": 2}}
BASES = {"ltx2_generate_two_stage": GENERATE, "ltx2_retake": {}, "ltx2_long_video_20s": {}}
NAN = float("nan")  # json.dumps writes NaN, which the server's JSON reader takes
ONCE = [  # workflow, node, input at fault, value (or the node's changes), a word of the message
    ("ltx2_generate_two_stage", "4", "frames", 16, "8k+1"),
    ("ltx2_generate_two_stage", "4", "frames", 1449, "maximum 1441"),
    ("ltx2_generate_two_stage", "4", "width", 16384, "maximum 8192"),
    ("ltx2_generate_two_stage", "4", "width", 2**31, "maximum 8192"),
    ("ltx2_generate_two_stage", "4", "width", "wide", "INT"),
    ("ltx2_generate_two_stage", "4", "mode", "bogus", "not a choice"),
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
    # checked when queued since issue 35 (before: when the node ran, some after the model loaded)
    ("ltx2_t2v_one_stage", "1", "ckpt_name", None, "pick a file from models/checkpoints"),
    ("ltx2_retake", "5", "keep_audio", {"keep_video": True, "keep_audio": True}, "keeps both"),
    ("ltx2_retake", "5", "end", {"start": 1.0, "end": 0.5}, "is empty"),
    ("ltx2_retake", "6", "mode", {"mode": "two-stage"}, "runs one stage"),
    ("ltx2_long_video_20s", "4", "overlap", {"window": 33, "overlap": 32}, "must be below the window"),
    ("ltx2_long_video_20s", "4", "window_prompts", "\n".join(f"part {i}" for i in range(6)), "6 window prompts"),
    ("ltx2_t2v_two_gpus", "10", "layout", '{"cfg": 4, "sp": 2}', "4 CPU workers are the most without a GPU"),
    ("ltx2_t2v_two_gpus", "10", "layout", '{"cfg": 2.5}', "cfg 2.5 is not a whole number"),
    ("ltx2_t2v_two_gpus", "10", "layout", '{"cfg": 2, "gpus": 2}', "'gpus' is no axis"),
    ("ltx2_t2v_two_gpus", "10", "layout", '{"cfg": 1e400}', "cfg inf is not a whole number"),
    ("ltx2_generate_two_stage", "4", "width", {"mode": "one-stage", "width": 100}, "multiples of 32"),
    ("ltx2_generate_two_stage", "4", "steps", {"mode": "distilled", "steps": 3}, "fixed 8-step"),
    ("ltx2_generate_two_stage", "4", "distilled_lora", TINY["ic_lora"], "is an IC-LoRA"),
    ("ltx2_t2v_one_stage", "4", "fps", NAN, "not a finite number"),
    ("ltx2_t2v_one_stage", "5", "cfg", "nan", "not a finite number"),
]


@pytest.mark.parametrize("workflow, node_id, fault, value, word", ONCE,
                         ids=[f"{w[5:]}-{i}-{str(v)[:12]}" for w, _, i, v, _ in ONCE])
def test_a_problem_is_refused_when_queued_on_the_input_at_fault(comfyui, workflow, node_id, fault, value, word):
    """Nothing runs; the 400 lists the problem on the input at fault (a validator's failure also on the other
    inputs it names, with the same message, which begins with the input at fault)."""
    base = BASES.get(workflow, SMALL)
    changes = value if isinstance(value, dict) else {fault: value}
    status, answer = _post(comfyui, _workflow(workflow, {**base, node_id: {**base.get(node_id, {}), **changes}}))
    assert status == 400, answer
    errors = _errors(answer, node_id)
    assert _at_fault(errors) == fault and fault in [name for name, _ in errors], errors
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
    assert _at_fault(errors) == name, errors
    text = json.dumps(answer).replace(json.dumps(value)[1:-1], "")  # the caller's own value may come back
    for leak in ("secret_model_type_xyz", "config.json", "weights.safetensors", "passwd", str(foreign.parent)):
        assert leak not in text, (leak, text)
    log = comfyui.log.read_text()
    assert "secret_model_type_xyz" not in log  # the foreign config was never read


def test_a_lone_surrogate_in_the_generate_prompt_gives_a_clear_message(comfyui):
    status, answer = _post(comfyui, _workflow("ltx2_generate_two_stage", {"4": {**GENERATE["4"],
                                                                              "prompt": "a cat \ud800"}}))
    assert status == 400, answer
    assert _at_fault(_errors(answer, "4")) == "prompt" and "lone surrogate" in _errors(answer, "4")[0][1]


def test_the_devices_route_states_the_cpu_worker_mode(comfyui):
    answer = comfyui.get("/ltx2/devices")
    assert answer == {"devices": [], "cpu_workers_max": 4, "attached_max": 64}
    status, answer = _post(comfyui, _workflow("ltx2_t2v_two_gpus", {**SMALL, "10": {"layout": '{"cfg": 4, "sp": 2}'}}))
    assert status == 400, answer  # 8 workers without attach: more than this machine's 4 CPU workers, when queued
    assert "4 CPU workers are the most without a GPU" in _errors(answer, "10")[0][1]
    status, answer = _post(comfyui, _workflow("ltx2_t2v_two_gpus", {**SMALL, "10": {"layout": '{"cfg": 4, "sp": 2}',
                                                                                   "attach": "127.0.0.1:29633"}}))
    assert status == 400 and "attach: set LTX2_WORKERS_KEY" in _errors(answer, "10")[0][1], answer
