"""The layout cost model (ltx2_core/parallel/cost_model.py, traffic.py, choose.py): its bytes against the published
per-forward figures, its one-GPU times against the measurements it was fed, and the layouts it picks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ltx2_core.parallel import ParallelConfig, default_layout
from ltx2_core.parallel.choose import fastest_layout, fit_tp, gpu_kind, link_for, predicted_times, regroups
from ltx2_core.parallel.config import stage_layout
from ltx2_core.parallel.cost_model import (Setting, best, forward_seconds, layouts, measured, predict,
                                           released_config, reshard_seconds, second_layout, single, stage_time,
                                           two_stage)
from ltx2_core.parallel.hardware import GPUS, LINKS, MEASURED
from ltx2_core.parallel.traffic import Tokens, cfg_gather_bytes, forward_traffic, weight_bytes

H200 = GPUS["H200"]
STAGE2 = Tokens(6144, 126)


def test_released_bytes_match_the_published_collective_table():
    """docs/performance.md's per-forward figures for the released model at 768×512×121, degree 2 (the SP figure
    there counts the all-gather as the rank's part, which is exactly (n−1)/n of the whole at n = 2)."""
    config = released_config("2.0")
    assert forward_traffic(config, STAGE2, ParallelConfig(sp=2)).sp_bytes / 1e9 == pytest.approx(3.6, abs=0.05)
    assert forward_traffic(config, STAGE2, ParallelConfig(tp=2)).tp_bytes / 1e9 == pytest.approx(9.8, abs=0.1)
    assert cfg_gather_bytes(STAGE2, 4, ParallelConfig(cfg=2)) / 1e6 == pytest.approx(3.2, abs=0.05)
    assert weight_bytes(config) / 1e9 == pytest.approx(37, abs=0.5)  # shared/docs: 37 GB in bf16


def test_one_gpu_forward_reproduces_the_measurements_it_was_fed():
    for (version, gpu), times in MEASURED.items():
        for tokens, ms in times.ms.items():
            sliced = replace(released_config(version), num_layers=times.blocks)
            got = forward_seconds(times, sliced, Tokens(tokens, 126), ParallelConfig(), GPUS[gpu]) * 1000
            # the fixed part is clamped at ≥ 0; the host's time at the smallest size is a floor, which the H100's
            # 3,840-token forwards (faster than its 1,536-token ones: host noise) sit under by up to 12 %
            assert got == pytest.approx(ms, rel=0.12), (version, gpu, tokens)
            if gpu == "H200":
                assert got == pytest.approx(ms, rel=0.035), (version, gpu, tokens)
        for tokens, ms in times.full_ms.items():
            got = forward_seconds(times, released_config(version), Tokens(tokens, 126), ParallelConfig(), GPUS[gpu])
            assert got * 1000 == pytest.approx(ms, rel=0.01 if tokens != 3840 or gpu != "H100" else 0.07)


def test_no_traffic_and_no_gain_on_one_gpu():
    config, setting = released_config("2.3"), Setting(gpu=H200)
    workload = two_stage(768, 512)
    alone = stage_time(workload.stages[1], ParallelConfig(), config, setting)
    assert alone.comm == 0
    assert alone.compute == pytest.approx(3 * measured("2.3", H200).full_ms[6144] / 1000, rel=0.01)
    assert layouts(1, 4) == [ParallelConfig()]


def test_layouts_respect_heads_passes_and_world():
    found = layouts(8, 4)
    assert all(c.world_size == 8 for c in found)
    assert ParallelConfig(4, 2, 1) in found and ParallelConfig(1, 8, 1) in found and ParallelConfig(1, 1, 8) in found
    assert all(c.cfg <= 2 for c in layouts(8, 2))
    assert all(32 % (c.sp * c.tp) == 0 for c in layouts(6, 4)) and ParallelConfig(3, 2, 1) in layouts(6, 4)


def test_slow_links_penalise_tensor_parallel_most():
    config, workload = released_config("2.3"), two_stage(768, 512)
    tp, cfg = ParallelConfig(tp=2), ParallelConfig(cfg=2)
    fast, slow = Setting(gpu=H200, link=LINKS["nvlink4"]), Setting(gpu=H200, link=LINKS["eth100"])
    assert single(workload, tp, config, slow).seconds > 2 * single(workload, tp, config, fast).seconds
    # cfg's own traffic (a gather of the passes' outputs) hardly feels the link; its stage 2 regroups only on the
    # fast one (`second_layout`), where the merged sp's all-to-alls cost less than the duplicated work
    assert predict(workload, cfg, cfg, config, slow).seconds == pytest.approx(
        predict(workload, cfg, cfg, config, fast).seconds, rel=0.01)
    assert single(workload, cfg, config, slow).seconds == predict(workload, cfg, cfg, config, slow).seconds
    assert single(workload, cfg, config, fast).seconds < predict(workload, cfg, cfg, config, fast).seconds


def test_stage_two_regroups_where_the_model_predicts_a_gain():
    config, workload = released_config("2.3"), two_stage(768, 1280)
    nvlink, ethernet = Setting(gpu=H200, link=LINKS["nvlink4"]), Setting(gpu=H200, link=LINKS["eth100"])
    assert second_layout(workload, ParallelConfig(cfg=2), config, nvlink) == ParallelConfig(sp=2)
    assert second_layout(workload, ParallelConfig(cfg=4, sp=2), config, nvlink) == ParallelConfig(sp=8)
    assert second_layout(workload, ParallelConfig(cfg=2), config, ethernet) == ParallelConfig(cfg=2)
    assert second_layout(workload, ParallelConfig(sp=2), config, nvlink) == ParallelConfig(sp=2)  # no cfg ranks
    h200 = ["NVIDIA H200"] * 2
    assert regroups(ParallelConfig(cfg=2), h200) and not regroups(ParallelConfig(cfg=2), h200, hosts=2)
    assert regroups(ParallelConfig(cfg=2), []) and not regroups(ParallelConfig(sp=2), [])  # CPU ranks; no cfg
    assert stage_layout(ParallelConfig(cfg=2, sp=2), 1, (32, 32)) == ParallelConfig(sp=4)
    assert stage_layout(ParallelConfig(cfg=2, sp=2), 2, (32, 32)) == ParallelConfig(cfg=2, sp=2)  # passes fill cfg
    assert stage_layout(ParallelConfig(cfg=4, sp=4, tp=4), 1, (32, 32)) == ParallelConfig(cfg=4, sp=4, tp=4)  # 64∤32


def test_resharding_moves_weights_only_when_tp_changes():
    config, setting = released_config("2.3"), Setting(gpu=H200)
    assert reshard_seconds(ParallelConfig(cfg=2), ParallelConfig(sp=2), config, setting) == 0
    there_and_back = reshard_seconds(ParallelConfig(sp=2), ParallelConfig(tp=2), config, setting)
    assert there_and_back == pytest.approx(weight_bytes(config) / 2 / LINKS["nvlink4"].bandwidth)
    with pytest.raises(ValueError, match="same GPUs"):
        predict(two_stage(768, 512), ParallelConfig(cfg=2), ParallelConfig(), config, setting)


def test_the_best_pair_is_never_slower_than_the_best_single_layout():
    config = released_config("2.3")
    for n in (2, 4, 8):
        for link in ("nvlink4", "pcie4"):
            one, pair = best(two_stage(768, 1280), n, config, Setting(gpu=H200, link=LINKS[link]))
            assert pair.seconds <= one.seconds + 1e-9


def test_spreading_text_and_decode_shortens_the_run():
    config, workload = released_config("2.3"), two_stage(768, 1280)
    plain = single(workload, ParallelConfig(cfg=2, sp=2), config, Setting(gpu=H200))
    spread = single(workload, ParallelConfig(cfg=2, sp=2), config, Setting(gpu=H200, spread=True))
    assert plain.seconds - spread.seconds == pytest.approx(plain.parts["decode"] * 3 / 4 + plain.parts["text"] / 2)


def test_gpu_and_link_from_device_names():
    assert gpu_kind("NVIDIA H100 80GB HBM3").name == "H100" and gpu_kind("NVIDIA GeForce RTX 4090") is None
    assert link_for(["NVIDIA H200"] * 2) == "nvlink4" and link_for(["NVIDIA B200"]) == "nvlink5"
    assert link_for(["NVIDIA H100 PCIe"] * 2) == "pcie5" and link_for(["NVIDIA RTX A6000"] * 2) == "pcie4"
    with pytest.raises(ValueError, match="scale_forward"):
        measured("2.0", H200)


def test_fastest_layout_keeps_the_memory_rule_and_beats_the_rule_of_thumb():
    names = ["NVIDIA H200"] * 4
    # weights that need tp 2 on 24 GB of free memory each: every layout picked has tp ≥ 2
    assert fit_tp(4, 38e9, 24e9) == 2 and fastest_layout(4, 4, 38e9, 24e9, names).tp >= 2
    config, workload = released_config("2.3"), two_stage(768, 512)
    chosen = fastest_layout(4, 4, 38e9, 140e9, names)
    rule = default_layout(4, 4, int(38e9), int(140e9))
    setting = Setting(gpu=H200)
    assert single(workload, chosen, config, setting).seconds <= single(workload, rule, config, setting).seconds
    assert chosen == min(layouts(4, 4), key=lambda c: single(workload, c, config, setting).seconds)
    # over PCIe, tensor parallel is not chosen when the weights fit; a GPU the model does not know: the rule
    assert fastest_layout(8, 4, 38e9, 79e9, ["NVIDIA H100 PCIe"] * 8).tp == 1
    assert fastest_layout(8, 4, 38e9, 79e9, ["NVIDIA RTX PRO 6000"] * 8) == default_layout(8, 4, int(38e9), int(79e9))


def test_predicted_times_cover_every_layout_the_widget_offers():
    got = predicted_times(4, ["NVIDIA H200"] * 4)
    assert (got["gpu"], got["link"]) == ("H200", "nvlink4")
    for passes in range(1, 5):
        for n in range(1, 5):
            for c in layouts(n, passes):
                assert got["seconds"][f"{c.cfg},{c.sp},{c.tp},{passes}"] > 0
    assert got["seconds"]["2,1,1,4"] < got["seconds"]["1,1,1,4"]
    assert predicted_times(2, [])["assumed"] and not got["assumed"]  # no GPU: the H100's figures over PCIe 4, said so
