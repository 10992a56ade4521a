"""bench/end_to_end.py on the CPU: the smoke run with the demo models, and the released-structure builders (the GPU
run's path) cut down; every part is reported and a real mp4 with video and sound is written. Times are not checked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import e2e_models  # noqa: E402
from e2e_clock import Clock, TimedSampler  # noqa: E402
from ltx2_core.model.text import gemma3  # noqa: E402
from support.configs import released_transformer_configs  # noqa: E402

PARTS = ["text", "stage 1", "upsample", "stage 2", "video decode", "audio decode", "write"]


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "bench/end_to_end.py", "--device", "cpu", "--out", str(tmp_path), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def _report(tmp_path: Path, *args: str) -> dict:
    run = _run(tmp_path, *args)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "| **total** |" in run.stdout
    (path,) = tmp_path.glob("end_to_end_*.json")
    return json.loads(path.read_text())


def _check(report: dict, frames: int, size: tuple[int, int], steps: tuple[int, int]) -> None:
    assert list(report["parts_s"]) == PARTS and all(s > 0 for s in report["parts_s"].values())
    assert report["total_s"] == pytest.approx(sum(report["parts_s"].values()), abs=0.01)
    assert [report["step_times"][s]["steps"] for s in ("stage 1", "stage 2")] == list(steps)
    assert report["steps"] == {"stage 1": steps[0], "stage 2": steps[1]} and report["steps_cut"]
    assert report["anchors"] is None  # a cut-down run is never set against sglang's figures
    assert {"device", "torch", "date", "variant", "peak_gib"} <= set(report)
    import av

    with av.open(report["mp4"]) as container:
        video, audio = container.streams.video[0], container.streams.audio[0]
        assert (video.codec_context.name, audio.codec_context.name) == ("h264", "aac")
        assert (video.width, video.height) == size and audio.channels == 2
        assert sum(1 for _ in container.decode(video=0)) == frames


def test_quick_run_reports_every_part_and_writes_an_mp4_with_sound(tmp_path):
    report = _report(tmp_path, "--quick", "--stage1-steps", "2", "--frames", "9", "--warmup")
    _check(report, 9, (128, 128), (2, 3))
    assert report["variant"] == "fp32" and report["quick"] and report["cuda_graphs"] == "auto" and report["warmup"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["end_to_end_fp32.json", "end_to_end_fp32.mp4"]


def test_released_builders_cut_down_run_the_same_path_with_fp8(tmp_path):
    """The GPU run's builders (bench/e2e_models.py) at 1/16 width, 2 blocks: fp8 blocks, Gemma's layers streamed as
    the command line's memory plan streams them, stage 2 cut to 1 step."""
    report = _report(tmp_path, "--divisor", "16", "--layers", "2", "--gemma-layers", "2", "--text-tokens", "128",
                     "--width", "128", "--height", "64", "--frames", "9", "--stage1-steps", "2",
                     "--stage2-steps", "1", "--fp8", "--text-streamed")
    _check(report, 9, (128, 64), (2, 1))
    assert report["variant"] == "fp8" and "released widths ÷ 16, 2 blocks" in report["structure"]
    assert report["text_encoder"] == "streamed from the host"


def test_cache_flag_runs_every_stage_with_step_caching(tmp_path):
    import end_to_end

    report = _report(tmp_path, "--quick", "--cache", "--stage1-steps", "8", "--frames", "9")
    assert report["variant"] == "fp32+cache" and len(report["cache_records"]) == 2  # stage 1 and stage 2
    assert end_to_end.step_cache(False) is None and end_to_end.cache_kwargs(None, []) == {}


def test_the_released_structure_is_the_release():
    structure = e2e_models.Structure()
    assert e2e_models.transformer_config(structure) == released_transformer_configs()["2.3"]
    assert structure.gemma_values() == gemma3.GEMMA3_12B_TEXT
    assert e2e_models.UPSAMPLER.mid_channels == 1024 and e2e_models.LORA_RANK == 384


class _Inner:
    config, device = "config", torch.device("cpu")

    def __init__(self):
        self.seen = []

    def __call__(self, positive, negative, latent, stage, generator, *, progress=None):
        self.seen.append((stage.name, stage.sigmas.tolist()))
        for done in range(1, stage.sigmas.shape[0]):
            progress(done, stage.sigmas.shape[0] - 1)
        return latent


def test_timed_sampler_marks_the_stages_and_cuts_the_one_asked():
    from ltx2_core.sampling.stage import Stage

    clock, inner = Clock(torch.device("cpu")), _Inner()
    sampler = TimedSampler(inner, clock, {"stage 2": 1})
    clock.resume()
    for name, sigmas in (("stage 1", [1.0, 0.5, 0.0]), ("stage 2", [0.9, 0.4, 0.0])):
        sampler(None, None, "latent", Stage(torch.tensor(sigmas), name), None,
                progress=lambda done, total, name=name: clock.progress(name, done, total))
    assert [name for name, _ in inner.seen] == ["stage 1", "stage 2"]
    assert inner.seen[0][1] == pytest.approx([1.0, 0.5, 0.0]) and inner.seen[1][1] == pytest.approx([0.9, 0.4])
    assert list(clock.parts) == ["stage 1", "upsample", "stage 2"]
    times = clock.step_times()
    assert [times[s]["steps"] for s in ("stage 1", "stage 2")] == [2, 1]
    assert times["stage 2"]["median_step_s"] is None  # one step: no steady-state figure


def test_a_failed_run_leaves_what_it_timed(tmp_path, monkeypatch):
    """A run that fails in sampling still writes the parts timed before it and the error (a run on a lent device is
    not repeated); a request that cannot run is refused before any model is built."""
    import end_to_end

    def fail(*args, **kwargs):
        raise RuntimeError("sampling failed")

    monkeypatch.setattr(end_to_end, "sample_request", fail)
    with pytest.raises(RuntimeError, match="sampling failed"):
        end_to_end.main(["--quick", "--device", "cpu", "--frames", "9", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "end_to_end_fp32.json").read_text())
    assert list(report["parts_s"]) == ["text"] and "sampling failed" in report["error"]
    monkeypatch.setattr(end_to_end, "build_encoder", fail)
    with pytest.raises(ValueError, match="64"):
        end_to_end.main(["--quick", "--device", "cpu", "--width", "96", "--out", str(tmp_path)])
