"""The UI-format examples in ComfyUI's real frontend (headless Chromium): every node type is known, nothing from
the pack logs an error, and the graph the frontend loads queues exactly the API-format example beside it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import PACK_FOLDER, ROOT

UI_WORKFLOWS = sorted((ROOT / "example_workflows").glob("*.json"))
BROWSER_SCRIPT = Path(__file__).with_name("browser.py")


@pytest.fixture(scope="module")
def frontend_results(comfyui):
    python = os.environ["COMFYUI_PYTHON"]
    if not shutil.which("chromium") or subprocess.run([python, "-c", "import playwright"]).returncode:
        pytest.skip("no headless browser: build the shared ComfyUI with WITH_BROWSER=1 (Chromium + playwright)")
    run = subprocess.run([python, str(BROWSER_SCRIPT), comfyui.url, "check", *map(str, UI_WORKFLOWS)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return {Path(result["file"]).name: result for result in map(json.loads, run.stdout.splitlines())}


@pytest.mark.parametrize("path", UI_WORKFLOWS, ids=[p.name for p in UI_WORKFLOWS])
def test_ui_example_loads_and_queues_its_api_twin(frontend_results, path):
    result = frontend_results[path.name]
    assert result["missing"] == []
    assert [e for e in result["errors"] if "LTX2" in e or PACK_FOLDER in e] == []
    api = json.loads((path.parent / "api" / path.name.replace(".json", ".api.json")).read_text())
    prompt = result["prompt"]
    assert {k: v["class_type"] for k, v in prompt.items()} == {k: v["class_type"] for k, v in api.items()}
    for node_id, node in api.items():
        inputs = dict(prompt[node_id]["inputs"])
        if node["class_type"] == "LoadAudio":  # the frontend adds its audio player's address, which the server ignores
            assert f"filename={node['inputs']['audio']}&type=input" in inputs.pop("audioUI"), node_id
        if node["class_type"].startswith("SaveAudio"):  # its player of the saved sound, empty until the run
            assert inputs.pop("audioUI") == "", node_id
        expected = dict(node["inputs"])
        if node["class_type"] == "LoadVideo":  # its preview widget's value, which the server ignores: the frontend
            # sends it empty once the preview widget exists, which a slow machine may not have made yet
            assert inputs.pop("video-preview", "") == expected.pop("video-preview", "") == "", node_id
        assert inputs == expected, node_id
    # a dragged-in example finds its pictures and sounds: no request fails, every image box shows its picture
    assert [e for e in result["errors"] if e.startswith("HTTP 4") and "/view" in e] == []
    assert all(width == 384 for width in result["images"].values()), result["images"]
    assert len(result["images"]) == sum(node["class_type"] == "LoadImage" for node in api.values())


def test_every_ui_example_has_an_api_twin():
    names = {p.name.replace(".json", "") for p in UI_WORKFLOWS}
    assert names == {p.name.replace(".api.json", "") for p in (ROOT / "example_workflows" / "api").glob("*.api.json")}


def _widget(comfyui, tmp_path, gpus: list | None) -> dict:
    python = os.environ["COMFYUI_PYTHON"]
    if not shutil.which("chromium") or subprocess.run([python, "-c", "import playwright"]).returncode:
        pytest.skip("no headless browser: build the shared ComfyUI with WITH_BROWSER=1 (Chromium + playwright)")
    devices = []
    if gpus is not None:
        (tmp_path / "gpus.json").write_text(json.dumps(gpus))
        devices = [str(tmp_path / "gpus.json")]
    run = subprocess.run([python, str(BROWSER_SCRIPT), comfyui.url, "widget", *devices], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.splitlines()[-1])
    assert [e for e in result["errors"] if "LTX2" in e or PACK_FOLDER in e or "ltx2_parallel" in e] == []
    assert result["readOnly"]  # the devices and weights rows are information, not text fields
    return result


def test_the_layout_widget_leaves_out_invalid_choices_and_its_value_is_queued(comfyui, tmp_path):
    gpus = [{"index": i, "name": "GPU", "total": 80e9, "free": 80e9} for i in range(4)]
    result = _widget(comfyui, tmp_path, gpus)
    assert result["before"]["sp"] == ["1", "2", "4"] and "GPU" in result["before"]["devices"]  # four GPUs
    assert result["after"]["tp"] == ["1", "2"]  # tp 4 with sp 2 needs 8 GPUs: not offered
    assert json.loads(result["after"]["layout"]) == {"cfg": 1, "sp": 2, "tp": 1}
    assert "LTX-2.5 22B 37.9 GB" in result["after"]["memory"] and "Warning" not in result["after"]["memory"]
    # every layout of 2 GPUs with its predicted time and weights per GPU, fastest first, the chosen one marked
    layouts = result["after"]["layouts"]
    assert [line[2:].split(":")[0] for line in layouts if line.startswith("▶")] == ["cfg 1 × sp 2 × tp 1"], layouts
    row = re.compile(r"^(?:▶|  ) cfg \d × sp \d × tp \d: (\d+\.\d) s, \d+\.\d GB per GPU$")
    times = [float(row.match(line)[1]) for line in layouts]
    assert len(times) == 3 and times == sorted(times), layouts
    (queued,) = [node for node in result["prompt"].values() if node["class_type"] == "LTX2ParallelConfig"]
    assert queued["inputs"]["layout"] == result["after"]["layout"]
    # the predicted time, from the server's cost model (GET /ltx2/layout_times): "GPU" is no GPU the model knows
    predicted = result["after"]["predicted"]
    assert re.match(r"\d+\.\d s, two-stage 768×512×121 on H100 \(assumed\) over pcie4 \(", predicted), predicted
    assert "a prediction, not a measurement" in predicted
    # the default layout: the rule's (the model does not know "GPU", as the pack's auto layout does not)
    assert json.loads(result["defaulted"]) == {"cfg": 4, "sp": 1, "tp": 1}


def test_the_widget_warns_when_the_weights_per_gpu_exceed_a_gpus_memory(comfyui, tmp_path):
    gpus = [{"index": i, "name": "RTX 4090", "total": 24e9, "free": 23e9} for i in range(2)]
    memory = _widget(comfyui, tmp_path, gpus)["after"]["memory"]
    assert "Warning: LTX-2 19B: 37.8 GB of weights per GPU exceed the 24 GB of RTX 4090; raise tp" in memory


def test_without_a_gpu_the_widget_offers_the_cpu_workers_the_server_runs(comfyui, tmp_path):
    """The server here has no GPU: the widget offers up to 4 CPU workers, as the server's validation allows, and
    the two-GPU example's layout (cfg 2) is valid."""
    result = _widget(comfyui, tmp_path, None)
    assert "CPU worker processes (at most 4)" in result["before"]["devices"]
    assert result["before"]["sp"] == ["1", "2", "4"] and result["before"]["cfg"] == ["1", "2", "3", "4"]
    assert "invalid" not in result["after"]["memory"]
    assert json.loads(result["after"]["layout"]) == {"cfg": 1, "sp": 2, "tp": 1}
    # each CPU worker holds the weights in RAM: the row says so, and the default layout starts one worker
    assert result["after"]["label"] == "weights per CPU worker (in RAM)"
    assert "2 worker(s) hold about 76 GB of RAM together" in result["after"]["memory"]
    assert json.loads(result["defaulted"]) == {"cfg": 1, "sp": 1, "tp": 1}


def test_the_generate_node_greys_what_the_run_ignores_and_still_queues_it(comfyui):
    """The retake example's clip sets the size, frames and rate (its 768x512x121 are ignored); one-stage runs no
    distilled LoRA; distilled runs its own 8 steps. Greyed widgets keep their values in the queued prompt."""
    python = os.environ["COMFYUI_PYTHON"]
    if not shutil.which("chromium") or subprocess.run([python, "-c", "import playwright"]).returncode:
        pytest.skip("no headless browser: build the shared ComfyUI with WITH_BROWSER=1 (Chromium + playwright)")
    paths = [ROOT / "example_workflows" / f"{name}.json" for name in ("ltx2_retake", "ltx2_generate_two_stage")]
    run = subprocess.run([python, str(BROWSER_SCRIPT), comfyui.url, "inputs", *map(str, paths)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    retake, two_stage = map(json.loads, run.stdout.splitlines())
    assert retake["before"]["LTX2Generate"] == ["distilled_lora", "fps", "frames", "height", "width"]
    assert retake["before"]["LTX2Retake"] == []  # the clip's sound is linked: keep_audio applies
    (queued,) = [n for n in retake["prompt"].values() if n["class_type"] == "LTX2Generate"]
    assert (queued["inputs"]["width"], queued["inputs"]["height"], queued["inputs"]["frames"]) == (768, 512, 121)
    assert two_stage["before"]["LTX2Generate"] == []
    assert two_stage["after"]["LTX2Generate"] == ["distilled_lora", "steps"]
    assert [e for e in retake["errors"] + two_stage["errors"] if "ltx2_inputs" in e or PACK_FOLDER in e] == []
