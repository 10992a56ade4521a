"""bench/native_swap.py's CPU smoke run (`--quick`) in the shared ComfyUI's Python: ComfyUI's SamplerCustomAdvanced
and LTX-2 SamplerCustomAdvanced (fast) both sample the tiny native bundle in one in-process ComfyUI (the pack
imported without a server), plain and on the MODEL patched by ComfyUI's EasyCache node, and the table and JSON
report them. No speed is asserted: it is a smoke run."""

from __future__ import annotations

import json
import math
import subprocess
import sys

from .conftest import ROOT, _comfyui

BENCH = ROOT / "bench" / "native_swap.py"


def test_quick_run_times_both_samplers_on_one_native_model(tmp_path):
    path, python = _comfyui()
    out = tmp_path / "native_swap.json"
    run = subprocess.run([str(python), str(BENCH), "--quick", "--comfyui", str(path), "--bundle-python",
                          sys.executable, "--easycache", "0.2", "--out", str(out)], capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    assert "| ComfyUI SamplerCustomAdvanced |" in run.stdout and "| LTX-2 SamplerCustomAdvanced (fast) |" in run.stdout
    assert "not a speed claim" in run.stdout and "noise differs" in run.stdout
    report = json.loads(out.read_text())
    assert (report["width"], report["height"], report["frames"], report["steps"]) == (96, 64, 9, 8)
    assert report["same_noise"] is False and report["quick"] is True
    native, ours = report["samplers"]["native"], report["samplers"]["ours"]
    for row in (native, ours):
        assert len(row["times_s"]) == 2 and row["median_s"] > 0 and row["peak_mib"] is None  # CPU: no device peak
        assert math.isclose(row["per_step_s"], row["median_s"] / 8)
        for part in ("video", "audio"):  # sampled from noise, not the empty latent back
            assert math.isfinite(row[part]["std"]) and row[part]["abs_max"] > 0.5
    assert native["video"]["shape"] == ours["video"]["shape"] and native["audio"]["shape"] == ours["audio"]["shape"]
    assert math.isclose(report["ours_over_native"]["time"], ours["median_s"] / native["median_s"])
    # --easycache: both samplers again on the MODEL patched by ComfyUI's EasyCache node; native's skips are counted
    cached = report["samplers"]["native+easycache"]
    assert len(cached["easycache_skipped"]) == 2 and all(0 <= n <= 8 for n in cached["easycache_skipped"])
    assert "median_s" in report["samplers"]["ours+easycache"] and report["easycache"] == 0.2
    assert "| ComfyUI SamplerCustomAdvanced + easycache |" in run.stdout


def test_bad_sizes_stop_before_comfyui_loads(tmp_path):
    (tmp_path / "main.py").write_text("")
    run = subprocess.run([sys.executable, str(BENCH), "--comfyui", str(tmp_path), "--frames", "10"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 2 and "--frames must be 8k + 1" in run.stderr
