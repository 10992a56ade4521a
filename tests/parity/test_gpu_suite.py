"""The GPU suite (bench/gpu_suite.py) in its CPU smoke run: every section runs against the references, so the suite
never rots between the rare runs on a lent GPU; and its FLOP count equals the table of shared/docs/performance.md."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ltx2_core.model.transformer import kernels
from ltx2_core.model.transformer.config import TransformerConfig
from support.configs import RELEASED_2_0, RELEASED_2_3

ROOT = Path(__file__).resolve().parents[2]


def _suite_measure():
    spec = importlib.util.spec_from_file_location("suite_measure", ROOT / "bench" / "suite_measure.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("suite")
    run = subprocess.run([sys.executable, "bench/gpu_suite.py", "--quick", "--device", "cpu", "--out", str(out)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "## recompiles" in run.stdout and (out / "gpu_suite.md").read_text().startswith("# GPU suite: CPU")
    return json.loads((out / "gpu_suite.json").read_text())


def test_every_section_reports(report):
    assert list(report["sections"]) == ["forward", "step", "launch", "syncs", "recompiles", "memory", "kernels",
                                        "stage1", "profile", "fp8", "attention", "cache"]
    assert all(report["sections"][name] for name in report["sections"])


def test_the_memory_section_runs_each_weight_mode_resident_and_streamed(report):
    rows = report["sections"]["memory"]
    modes = {(version, weights) for version in ("2.0", "2.3") for weights in ("bf16", "fp8")}
    assert {(row["version"], row["weights"]) for row in rows} == modes
    assert {row["resident"] for row in rows} == {"3/3", "0/3"} and all(row["ms"] > 0 for row in rows)


def test_the_fp8_section_runs_every_recipe_the_cpu_runs_against_bf16(report):
    """On the CPU every fp8 recipe runs (PyTorch's reference `_scaled_mm`); fp8 rounding stays within a few percent of
    the bf16 (here fp32) output, and each recipe's quantiser and GEMM are timed apart."""
    rows = report["sections"]["fp8"]
    forward = [row for row in rows if row["part"] == "forward"]
    assert [row["recipe"] for row in forward][:3] == ["bf16", "dequantize", "tensor"]
    assert all("error" not in row and row["ms"] > 0 for row in rows if row["part"] == "forward"), forward
    assert all(0 < row["rel_err"] < 0.05 for row in forward[1:]), forward
    linear = [row for row in rows if row["part"] == "linear"]
    assert linear and all("error" not in row and row["quantise_ms"] > 0 and row["gemm_ms"] > 0 for row in linear)


def test_the_kernels_section_compares_ours_and_comfy_kitchen(report):
    """On the CPU "auto" takes none of comfy-kitchen's kernels, and its eager ones (forced) compute ours (fp32)."""
    rows = report["sections"]["kernels"]
    if not kernels.has("rms_adaln"):  # no comfy-kitchen, or ComfyUI's 0.2.12
        assert "not installed" in rows[0]["error"]
        return
    assert [(row["version"], row["rope"]) for row in rows] == [("2.0", "split"), ("2.3", "split"),
                                                               ("2.0", "interleaved")]
    for row in rows:
        assert "error" not in row and row["auto_ops"] == "none", row
        for name in ("forward", "attention", "qk_norm_rope", "adaln"):
            assert row[f"{name}_diff"] < 1e-5 and row[f"{name}_ours_ms"] > 0 and row[f"{name}_kitchen_ms"] > 0, row


def test_the_cache_section_skips_steps_and_its_replay_reads_nothing(report):
    """Per structure: full, easycache (threshold 1 on the tiny model: some steps skipped), and the schedule-decided
    replay of easycache's steps, which gives its result with no host read."""
    rows = report["sections"]["cache"]
    assert [(row["version"], row["side"]) for row in rows] == [(v, side) for v in ("2.0", "2.3")
                                                               for side in ("full", "easycache", "replay")]
    for full, cached, replay in zip(rows[::3], rows[1::3], rows[2::3]):
        assert 0 < cached["skipped"] == replay["skipped"] == cached["forwards_saved"] < full["steps"], cached
        assert cached["host_reads"] > 0 and replay["host_reads"] == 0 and full["forwards"] == full["steps"]
        assert 1e-4 < cached["video_rel_diff"] < 1 and cached["audio_rel_diff"] < 1, cached
        assert abs(replay["video_rel_diff"] - cached["video_rel_diff"]) < 1e-5, replay
        assert all(row["ms"] > 0 for row in (full, cached, replay))


def test_the_attention_section_runs_every_cpu_backend_and_names_autos_choice(report):
    """On the CPU: SDPA's own pick, math and flash on every shape class (fp32: exact to rounding), auto's choice
    (SDPA's CPU flash kernel) named per shape, the CUDA-only backends listed as unavailable."""
    rows = report["sections"]["attention"]
    summaries = [row for row in rows if row["backend"] == "summary"]
    assert [row["shape"] for row in summaries] == ["video self", "video self, masked", "text cross", "audio to video",
                                                   "video to audio", "audio self", "audio text cross"]
    for row in summaries:
        assert row["auto"] == "flash" and row["fastest"] in ("math", "flash"), row
        assert row["unavailable"] == "cudnn, efficient, flash4, sage, kitchen_int8", row
    measured = [row for row in rows if row["backend"] != "summary"]
    assert {row["backend"] for row in measured} == {"sdpa", "math", "flash"}
    assert all("failed" not in row and row["error"] < 1e-5 and row["ms"] > 0 for row in measured), measured


def test_the_three_sides_compute_the_same_forward(report):
    rows = report["sections"]["forward"]
    assert {row["version"] for row in rows} == {"2.0", "2.3"} and len(rows) == 4
    for row in rows:  # fp32, relative to the output's scale
        assert row["diff_ltx_core"] < 1e-5 and row["diff_diffusers"] < 1e-5, row
        assert min(row["ours_ms"], row["ltx_core_ms"], row["diffusers_ms"]) > 0


def test_step_sides_and_the_sampler_promises(report):
    step = report["sections"]["step"]
    assert [row["side"] for row in step[:3]] == ["ours, passes batched", "ours, one pass at a time", "reference loop"]
    assert all(row["passes"] == 4 and row["peak_gib"] > 0 for row in step)
    assert all(row["syncs_per_step"] == 0 and row["h2d_copies_per_step"] == 0 for row in report["sections"]["syncs"])
    recompiles = report["sections"]["recompiles"][0]
    assert recompiles["recompiles_after_new_scales"] == 0
    assert recompiles["graphs_after_new_scales"] == recompiles["graphs_first_run"] > 0
    assert all(row["cuda_graph_ms"] is None and row["compile_ms"] > 0 for row in report["sections"]["launch"])


def test_the_stage1_section_times_every_variant_and_the_passes_on_both_sides_of_the_crossover(report):
    rows = report["sections"]["stage1"]
    steps = [row for row in rows if row["measure"] == "step"]
    assert [row["version"] for row in steps] == ["2.0", "2.3"]
    for row in steps:  # eager, the captured step (EagerReplay on the CPU), compile + capture, and the FLOP time
        assert min(row["eager_ms"], row["graph_ms"], row["compile_graph_ms"], row["flop_ms"]) > 0, row
        assert row["best_vs_flop"] > 0 and row["passes"] == 4
    passes = [row for row in rows if row["measure"] == "passes"]
    assert [row["version"] for row in passes] == ["2.0", "2.0"]  # the first release, at both sizes
    assert passes[0]["video_tokens"] < passes[1]["video_tokens"]
    assert all(row["batched_ms"] > 0 and row["one_pass_ms"] > 0 for row in passes)
    assert all(row["policy_passes"] == 4 for row in passes)  # the CPU: no measured crossover, batched
    assert rows[-1]["measure"] == "crossover" and rows[-1]["capability"] is None


def test_the_profile_section_tables_the_top_ops_beside_the_census(report):
    rows = report["sections"]["profile"]
    totals = [row for row in rows if row["kernel"] == "(all)"]
    assert [row["version"] for row in totals] == ["2.0", "2.3"]
    for row in totals:
        assert row["ms"] > 0 and row["census_ops_per_block"] > 0 and row["census_roofline_ms"] > 0, row
    assert totals[0]["census_beyond_first"] == "{}" and "mul" in totals[1]["census_beyond_first"]
    top = [row for row in rows if row["kernel"] != "(all)"]
    assert top and all(0 < row["share"] <= 1 and row["count_per_block"] > 0 for row in top)


@pytest.mark.parametrize("section, version", [(RELEASED_2_0, "2.0.0"), (RELEASED_2_3, "2.3.0")], ids=["2.0", "2.3"])
def test_flop_count_matches_the_documented_table(section, version):
    """121 frames: 126 audio tokens, 1,024 text tokens; TFLOP per forward 48 / 199 / 600 / 1,714."""
    config = TransformerConfig.from_metadata(section, version)
    measure = _suite_measure()
    for video_tokens, tflop in ((1536, 48), (6144, 199), (15360, 600), (32640, 1714)):
        with_kv = measure.forward_flops(config, video_tokens, 126, 1024) / 1e12
        assert with_kv == pytest.approx(tflop, rel=5e-3)
        # the text K/V projections: 4.1 TFLOP, outside the timed forward where a run computes them once
        without = measure.forward_flops(config, video_tokens, 126, 1024, text_kv=False) / 1e12
        assert with_kv - without == pytest.approx(4.1, rel=0.01)
    assert measure.in_forward_text_kv(config) == (version == "2.3.0")  # 2.0 caches them per run, 2.3 cannot
