"""Queueing prompts on a test server over its HTTP API (an example workflow with the tiny models' files picked) and
reading how each ended (`/history`): a result, an interrupt, or an error clear or not."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import NamedTuple

from .conftest import ROOT, TINY

API = ROOT / "example_workflows" / "api"
FILES = {"ckpt_name": TINY["checkpoint"], "text_encoder": TINY["text_encoder"],
         "upscale_model_name": TINY["upsampler"], "distilled_lora": TINY["lora"], "lora_name": TINY["lora"]}
# what a refusal of ours, or a run-time check of a value, raises: its message is meant for the user
CLEAR = ("ValueError", "MemoryPlanError", "NonFiniteError", "CheckpointError", "LTX2Error", "MissingConfigError")


class Ended(NamedTuple):
    """How a queued prompt ended: "success", "error" (with the exception's type and message) or "interrupted"."""

    status: str
    exception_type: str = ""
    message: str = ""
    traceback: str = ""

    @property
    def clear(self) -> bool:
        """A result, an interrupt, or an error of a kind meant for the user whose message is not a traceback."""
        if self.status != "error":
            return True
        return self.exception_type.rsplit(".", 1)[-1] in CLEAR and bool(self.message.strip()) and \
            "Traceback" not in self.message


def workflow(name: str, changes: dict[str, dict] | None = None) -> dict:
    """An example API workflow with the tiny models' files picked and `changes` (node id -> inputs) applied to the
    nodes it has."""
    graph = json.loads((API / f"{name}.api.json").read_text())
    for node in graph.values():
        node["inputs"].update({k: v for k, v in FILES.items() if k in node["inputs"]
                               and not isinstance(node["inputs"][k], list)})
    for node_id, inputs in (changes or {}).items():
        if node_id in graph:
            graph[node_id]["inputs"].update(inputs)
    return graph


def queue(server, graph: dict) -> tuple[int, dict]:
    """(HTTP status, answer) of POST /prompt."""
    request = urllib.request.Request(server.url + "/prompt", json.dumps({"prompt": graph}).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def ended(server, prompt_id: str, timeout: float) -> Ended:
    """How the prompt ended; past `timeout` seconds it is interrupted (POST /interrupt) and waited for."""
    deadline, interrupted = time.monotonic() + timeout, False
    while True:
        history = server.get(f"/history/{prompt_id}")
        if prompt_id in history:
            return _outcome(history[prompt_id]["status"])
        if time.monotonic() > deadline and not interrupted:
            server.post("/interrupt")
            deadline, interrupted = time.monotonic() + 300, True
        elif time.monotonic() > deadline:
            raise TimeoutError(f"prompt {prompt_id} did not end within {timeout:g} s and an interrupt")
        time.sleep(0.5)


def _outcome(status: dict) -> Ended:
    for kind, data in status.get("messages", []):
        if kind == "execution_error":
            return Ended("error", data.get("exception_type", ""), data.get("exception_message", ""),
                         "".join(data.get("traceback", [])))
        if kind == "execution_interrupted":
            return Ended("interrupted")
    return Ended("success" if status.get("status_str") == "success" else status.get("status_str", "unknown"))


def answers(server) -> bool:
    """Whether the server still answers (its node list and its queue)."""
    try:
        return bool(server.get("/object_info/LTX2Sampler")) and "queue_running" in server.get("/queue")
    except OSError:
        return False

