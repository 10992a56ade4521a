"""Random requests against the server under a memory limit (conftest's `limited_comfyui`), so that the next request
that would sink a server is found here and not by a user: hypothesis picks an example workflow that runs on the tiny
models, one or two of its LTX-2 nodes, and for about half their widgets a value within the range /object_info states
(now and then one outside it); each prompt must end in a result or a clear error (HTTP 400 naming the node and the input, or an
execution error of a kind meant for the user whose message is not a traceback), and the server must still answer.

Bounded: MAX_EXAMPLES prompts, each interrupted after PROMPT_SECONDS, and none started after BUDGET seconds (the
rest pass untried; at least MIN_TRIED must have run); derandomized, no example database, no shrinking (a failure
is reported as found, with every outcome so far)."""

from __future__ import annotations

import json
import time

from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from .prompts import answers, ended, queue, workflow

MAX_EXAMPLES, MIN_TRIED, BUDGET, PROMPT_SECONDS = 24, 10, 120.0, 30.0
# the example workflows the tiny LTX-2.3 models run (not the GGUF, LTX-2.5 and native ones, nor the workers')
WORKFLOWS = ("ltx2_t2v_one_stage", "ltx2_t2v_two_stage", "ltx2_t2v_distilled", "ltx2_generate_two_stage", "ltx2_t2a",
             "ltx2_i2v_one_stage", "ltx2_first_last_frame", "ltx2_a2v_lipsync", "ltx2_long_video_20s", "ltx2_retake",
             "ltx2_ic_lora_control")
# every example starts small, so that a node not drawn costs little
SMALL = {"width": 64, "height": 64, "frames": 9, "steps": 1, "duration": 0.4, "window": 17, "overlap": 8}
ISSUE = {"width": 8192, "height": 8192, "frames": 1441}  # issue 35's: within every maximum, 6 GB of latent
CLIP_INPUTS = {"width", "height", "frames", "duration", "window", "fps"}
TEXTS = ("", " ", "auto", "a cat", "1.0, 0.5, 0.0", "28,29", "-1", "1e309", "nan", "a cat " * 400, "🙂 ünïcode")


def _small(graph: dict) -> dict:
    for node in graph.values():
        if node["class_type"].startswith("LTX2") and node["class_type"] != "LTX2Retake":
            node["inputs"].update({k: v for k, v in SMALL.items() if k in node["inputs"]
                                   and not isinstance(node["inputs"][k], list)})
    return graph


def _issue() -> dict:
    """The one-stage example at the issue's size (LTX-2 Empty Latent is its node 4)."""
    graph = _small(workflow("ltx2_t2v_one_stage"))
    graph["4"]["inputs"].update(ISSUE)
    return graph


def _spec(info: dict, class_type: str, name: str) -> tuple[str, dict, list | None]:
    """(type, options, combo choices) of a node's input as /object_info states it."""
    inputs = info[class_type]["input"]
    kind, *rest = {**inputs.get("optional", {}), **inputs["required"]}[name]
    options = rest[0] if rest else {}
    if isinstance(kind, list):
        return "COMBO", options, kind
    return kind, options, options.get("options") if kind == "COMBO" else None


def _within(kind: str, options: dict, choices: list | None, on_step: bool = False) -> st.SearchStrategy:
    """A value within the input's stated range; `on_step`: an INT on its step (sizes in 32s, 8k+1 frames)."""
    if kind == "INT":
        low, high, step = options.get("min", -2**63), options.get("max", 2**63 - 1), options.get("step", 1)
        stepped = st.integers(0, (high - low) // step).map(lambda k: low + k * step)
        return stepped if on_step or step == 1 else st.one_of(stepped, st.integers(low, high))
    if kind == "FLOAT":
        return st.floats(options.get("min", -1e6), options.get("max", 1e6), allow_nan=False, allow_infinity=False)
    if kind == "BOOLEAN":
        return st.booleans()
    if kind == "COMBO":
        return st.sampled_from(choices)
    return st.one_of(st.sampled_from(TEXTS), st.text(max_size=30))


def _outside(kind: str, options: dict) -> st.SearchStrategy | None:
    """Values past a numeric input's stated limits (None: it states none)."""
    limits = [("max", 1), ("min", -1)]
    choices = [options[bound] + sign * (1 if kind == "INT" else 0.5) for bound, sign in limits if bound in options]
    return st.sampled_from(choices) if kind in ("INT", "FLOAT") and choices else None


@st.composite
def requests(draw, info: dict):
    """(workflow name, graph, the (node, input) set outside its range or None, what was changed)."""
    name = draw(st.sampled_from(WORKFLOWS))
    graph = _small(workflow(name))
    ours = sorted(i for i, n in graph.items() if n["class_type"].startswith("LTX2"))
    sized = [i for i in ours if CLIP_INPUTS & set(graph[i]["inputs"])]  # drawn twice as often
    chosen = draw(st.lists(st.sampled_from(ours + sized), min_size=1, max_size=2, unique=True))
    changed, outside = {}, None
    for node_id in chosen:
        node = graph[node_id]
        widgets = sorted(key for key, value in node["inputs"].items() if not isinstance(value, list))
        drawn = set(draw(st.lists(st.sampled_from(widgets), min_size=1, unique=True))) if widgets else set()
        whole = draw(st.booleans())  # the clip's size as a whole, on its steps: what sets a request's memory
        drawn |= set(widgets) & CLIP_INPUTS if whole else set()
        for input_name in sorted(drawn):  # the others keep the example's: most prompts then run
            kind, options, choices = _spec(info, node["class_type"], input_name)
            past = _outside(kind, options)
            if outside is None and past is not None and draw(st.integers(0, 9)) == 0:
                node["inputs"][input_name], outside = draw(past), (node_id, input_name)
            else:
                node["inputs"][input_name] = draw(_within(kind, options, choices, whole and input_name in CLIP_INPUTS))
            changed[f"{node_id}.{input_name}"] = node["inputs"][input_name]
    return name, graph, outside, changed


def _check_refused(answer: dict, outside: tuple[str, str] | None) -> None:
    """An HTTP 400: node errors naming their inputs, no traceback; the value outside its range among them."""
    errors = [(node_id, e.get("extra_info", {}).get("input_name"), e.get("details", ""))
              for node_id, found in answer.get("node_errors", {}).items() for e in found.get("errors", [])]
    assert errors or answer.get("error"), answer
    assert "Traceback" not in json.dumps(answer), answer
    if outside is not None:
        assert outside in [(node_id, name) for node_id, name, _ in errors], (outside, errors)


def test_random_requests_end_in_a_result_or_a_clear_error_and_the_server_answers(limited_comfyui):
    server = limited_comfyui
    info = {name: spec for name, spec in server.get("/object_info").items() if name.startswith("LTX2")}
    warm = queue(server, _small(workflow("ltx2_t2v_one_stage")))[1]  # the models load once, outside the budget
    assert ended(server, warm["prompt_id"], 300).status == "success"
    start, tried = time.monotonic(), []

    @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
              phases=(Phase.explicit, Phase.generate), suppress_health_check=list(HealthCheck))
    @given(requests(info))
    @example(("ltx2_t2v_one_stage", _issue(), None, ISSUE))  # found by a user on main: here first
    def one_request(request):
        name, graph, outside, changed = request
        if time.monotonic() - start > BUDGET:
            return
        began = time.monotonic()
        status, answer = queue(server, graph)
        outcome = f"HTTP {status}" if status != 200 else ended(server, answer["prompt_id"], PROMPT_SECONDS)
        tried.append((name, changed, outcome, time.monotonic() - began))
        if status == 200:
            assert outside is None, (name, changed, "queued with a value outside its range")
            assert outcome.clear, (name, changed, outcome)
        else:
            assert status == 400, (name, changed, status, answer)
            _check_refused(answer, outside)
        assert answers(server), (name, changed, "the server no longer answers")

    try:
        one_request()
    finally:
        print("\n".join(f"{name} {json.dumps(changed, default=str)[:300]} -> {str(outcome)[:300]} ({seconds:.0f} s)"
                        for name, changed, outcome, seconds in tried))
    assert len(tried) >= MIN_TRIED, f"only {len(tried)} prompts in {BUDGET:g} s"
