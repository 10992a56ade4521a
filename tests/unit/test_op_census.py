"""bench/op_census.py counts one forward's ops on fake tensors at the released widths: its matmul FLOPs agree with
the suite's formula (which the GPU tables divide by), LTX-2.5's gates are the ops it adds to 2.0's, and no release
reads a value back inside a forward."""

from __future__ import annotations

import pytest
from support.bench_modules import bench_module


@pytest.fixture(scope="module")
def counted():
    census = bench_module("op_census")
    return census, {v: census.census(v, 1, (121, 256, 384)) for v in ("2.0", "2.3", "2.5")}


@pytest.mark.parametrize("version", ["2.0", "2.3", "2.5"])
def test_the_census_counts_the_formulas_flops_and_no_read_back(counted, version):
    census, ops = counted
    measure = bench_module("suite_measure")
    models = bench_module("suite_models")
    config = models.suite_config(version, 1, quick=False)
    expected = measure.forward_flops(config, 1536, 126, 1024, text_kv=measure.in_forward_text_kv(config))
    summary = census.summary(ops[version], 1)
    # the formula leaves out the AdaLN, gate and in/out projections: under 1 % at 1,536 video tokens
    assert summary["tflop"] * 1e12 == pytest.approx(expected, rel=0.01)
    assert summary["syncs"] == 0 and summary["ops"] > 100


def test_ltx25s_gates_are_what_it_adds_to_20(counted):
    census, ops = counted
    extra = census.extra_ops(ops["2.5"], ops["2.0"], 1)
    assert extra["sigmoid"] == 6  # one gate per attention: video self, text, a2v; audio self, text, v2a
