"""comfy-kitchen's fused transformer kernels (ltx2_core/model/transformer/kernels.py) against ours, on its eager
backend (the "kitchen" mode forced on the CPU): each op, and whole tiny forwards of 2.0 (split and interleaved RoPE),
2.3 and 2.5; with no host sync; "auto" on the CPU keeps ours.

Tolerances: fp32 1e-5 (the same math, summed in another order); bf16 2·2⁻⁷ of the output's scale per op (bf16
keeps 8 bits: 2⁻⁷ relative), 3·2⁻⁷ for a whole forward (a few bf16 roundings apart over 3 blocks; measured ≤ 6.1e-3).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest
import torch

from ltx2_core import TransformerConfig
from ltx2_core.demo import demo_inputs, demo_transformer
from ltx2_core.model.transformer import kernels
from ltx2_core.model.transformer.attention import QKNorm
from ltx2_core.model.transformer.rope import apply_rope, rope_tables, rotation_matrices
from support.census import OpCensus

ck = pytest.importorskip("comfy_kitchen")
needs = pytest.mark.skipif(not all(kernels.has(op) for op in kernels.OPS),
                           reason="comfy-kitchen >= 0.2.40 (rms_adaln, rms_rope1) is not installed")
BF16 = 2 * 2.0**-7
DTYPES = [pytest.param(torch.float32, 1e-5, id="fp32"), pytest.param(torch.bfloat16, BF16, id="bf16")]


@pytest.fixture
def calls(monkeypatch):
    """Counts the calls of each comfy-kitchen function the kernels module takes (they still compute)."""
    seen: dict[str, int] = {}
    for op in kernels.OPS:
        if kernels.has(op):
            original = getattr(ck, op)

            def spy(*args, _op=op, _original=original, **kwargs):
                seen[_op] = seen.get(_op, 0) + 1
                return _original(*args, **kwargs)

            monkeypatch.setattr(ck, op, spy)
    return seen


def _close(got: torch.Tensor, want: torch.Tensor, tol: float) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    scale = want.float().abs().max().item()
    diff = (got.float() - want.float()).abs().max().item()
    assert diff <= tol * max(scale, 1.0), (diff, scale)


def _randn(*shape: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@needs
@pytest.mark.parametrize(("dtype", "tol"), DTYPES)
@pytest.mark.parametrize("per_token", [False, True], ids=["per-sample", "per-token"])
def test_each_adaln_equals_ours(dtype, tol, per_token, calls):
    x = _randn(2, 7, 32, dtype=dtype) * 3
    n = 7 if per_token else 1
    scale, shift = _randn(2, n, 32, dtype=dtype, seed=1), _randn(2, n, 32, dtype=dtype, seed=2)
    for fn in (kernels.rms_adaln, kernels.layer_adaln):
        with kernels.use_kernels("ours"):
            want = fn(x, scale, shift, 1e-6)
        with kernels.use_kernels("kitchen"):
            got = fn(x, scale, shift, 1e-6)
        _close(got, want, tol)
    assert calls == {"rms_adaln": 1, "adaln": 1}


def _tables(rope_type: str, dtype: torch.dtype, tokens: int = 6, heads: int = 4, head_dim: int = 16):
    positions = torch.rand(1, 3, tokens, 2, generator=torch.Generator().manual_seed(3)) * 10
    return rope_tables(positions, dim=heads * head_dim, heads=heads, max_pos=(20, 2048, 2048), theta=10000.0,
                       rope_type=rope_type, float64=True, dtype=dtype, freqs=True)


@needs
@pytest.mark.parametrize(("dtype", "tol"), DTYPES)
@pytest.mark.parametrize(("rope_type", "op"), [("interleaved", "rms_rope1"), ("interleaved", "apply_rope1"),
                                                ("split", "apply_rope_split_half1")])
def test_qk_norm_and_rope_equal_ours(dtype, tol, rope_type, op, calls, monkeypatch):
    """RMSNorm across all heads (weighted), then RoPE per head, through each fused path."""
    heads, head_dim = 4, 16
    rope = _tables(rope_type, dtype, heads=heads, head_dim=head_dim)
    norm = QKNorm(heads * head_dim, 1e-6).to(dtype)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.5 * _randn(heads * head_dim, dtype=dtype, seed=4))
    x = _randn(2, 6, heads * head_dim, dtype=dtype, seed=5) * 4
    with torch.no_grad():
        want = apply_rope(norm(x).unflatten(-1, (-1, head_dim)), rope, rope_type)  # ours, as before the switch
        with kernels.use_kernels("ours"):
            assert torch.equal(kernels.qk_norm_rope(x, norm, rope, rope_type, head_dim), want)
        if op == "apply_rope1":  # comfy-kitchen 0.2.12's interleaved path: no rms_rope1
            monkeypatch.setattr(kernels, "has", lambda name: name != "rms_rope1")
        with kernels.use_kernels("kitchen"):
            got = kernels.qk_norm_rope(x, norm, rope, rope_type, head_dim)
    _close(got, want, tol)
    assert calls == {op: 1}


@needs
def test_rotation_matrices_rotate_as_our_tables():
    """Rope.freqs holds [[cos, −sin], [sin, cos]] of the same angles, per head, in the tables' dtype."""
    for rope_type in ("interleaved", "split"):
        rope = _tables(rope_type, torch.float32)
        half = rope.cos[..., ::2] if rope_type == "interleaved" else rope.cos
        assert rope.freqs.shape == (*half.shape, 2, 2) and rope.freqs.dtype == torch.float32
        torch.testing.assert_close(rope.freqs[..., 0, 0], half, rtol=0, atol=0)
        torch.testing.assert_close(rope.freqs[..., 1, 1], half, rtol=0, atol=0)
        torch.testing.assert_close(rope.freqs[..., 0, 1], -rope.freqs[..., 1, 0], rtol=0, atol=0)


CONFIGS = [
    pytest.param(TransformerConfig.tiny("2.0"), id="2.0-split"),
    pytest.param(dataclasses.replace(TransformerConfig.tiny("2.0"), rope_type="interleaved"), id="2.0-interleaved"),
    pytest.param(TransformerConfig.tiny("2.3"), id="2.3"),
    pytest.param(TransformerConfig.tiny("2.5"), id="2.5"),
]


def _forward(model, mode: str):
    with kernels.use_kernels(mode), torch.no_grad():
        video, audio, run = demo_inputs(model, text_tokens=16)
        return model(video, audio, run), run


@needs
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize(("dtype", "tol"), [pytest.param(torch.float32, 1e-5, id="fp32"),
                                            pytest.param(torch.bfloat16, 3 * 2.0**-7, id="bf16")])
def test_a_tiny_forward_with_the_kitchen_kernels_equals_ours(config, dtype, tol, calls):
    model = demo_transformer(config).to(dtype)
    (want_v, want_a), run = _forward(model, "ours")
    assert run.video_rope.freqs is None and not calls
    (got_v, got_a), run = _forward(model, "kitchen")
    assert run.video_rope.freqs is not None and run.audio_cross_rope.freqs is not None
    _close(got_v, want_v, tol)
    _close(got_a, want_a, tol)
    rope_op = "rms_rope1" if config.rope_type == "interleaved" else "apply_rope_split_half1"
    assert calls["rms_adaln"] > 0 and calls["adaln"] == 2 and calls[rope_op] > 0, calls


@needs
@pytest.mark.parametrize("config", CONFIGS[:2] + CONFIGS[3:])
def test_the_kitchen_forward_has_no_host_sync(config, calls):
    model = demo_transformer(config)
    with kernels.use_kernels("kitchen"), torch.no_grad():
        video, audio, run = demo_inputs(model, text_tokens=16)
        with OpCensus() as census:
            model(video, audio, run)
    assert census.syncs() == {} and census.transfers() == 0
    assert calls["rms_adaln"] > 0


def test_auto_on_the_cpu_keeps_ours(calls):
    assert kernels.KERNELS == "auto"
    for op in kernels.OPS:
        assert not kernels.available(op, torch.device("cpu"), torch.float32)
        assert not kernels.fused(op, torch.device("cpu"), torch.bfloat16)
    model = demo_transformer(TransformerConfig.tiny("2.3"))
    (video, audio), run = _forward(model, "auto")
    assert run.video_rope.freqs is None and not calls  # no comfy-kitchen function ran
    (want_v, want_a), _ = _forward(model, "ours")
    assert torch.equal(video, want_v) and torch.equal(audio, want_a)


def test_a_function_the_installed_comfy_kitchen_lacks_is_ours(monkeypatch, calls):
    """ComfyUI's pinned comfy-kitchen 0.2.12 has no rms_adaln: even "kitchen" then computes ours."""
    monkeypatch.delattr(ck, "rms_adaln")
    x = _randn(1, 3, 8, dtype=torch.float32)
    with kernels.use_kernels("kitchen"):
        assert not kernels.fused("rms_adaln", x.device, x.dtype)
        out = kernels.rms_adaln(x, x, x, 1e-6)
    torch.testing.assert_close(out, torch.nn.functional.rms_norm(x, (8,), eps=1e-6) * (1 + x) + x)
    assert "rms_adaln" not in calls


class _Constraints:
    def __init__(self, devices, dtypes):
        from comfy_kitchen.constraints import ParamConstraint

        self.default_devices = frozenset(devices)
        self.params = {"x": ParamConstraint(dtypes=frozenset(dtypes))}


class _Registry:
    """A registry with a CUDA backend serving rms_adaln in bf16 only, beside the eager one."""

    _capabilities: ClassVar = {"cuda": {"rms_adaln"}, "eager": set(kernels.OPS)}

    def is_available(self, name):
        return name in self._capabilities

    def get_constraints(self, backend, op):
        return _Constraints({"cuda"}, {torch.bfloat16}) if backend == "cuda" else _Constraints({"cpu", "cuda"}, ())


def test_auto_takes_a_kernel_where_a_gpu_backend_serves_the_device_and_dtype(monkeypatch):
    monkeypatch.setattr(kernels, "_registry", _Registry())
    monkeypatch.setattr(kernels, "cuda_backend_usable", lambda: False)  # a PyTorch for CUDA 12: as ComfyUI, none
    try:
        kernels.refresh()
        assert not kernels.fused("rms_adaln", torch.device("cuda"), torch.bfloat16)
        monkeypatch.setattr(kernels, "cuda_backend_usable", lambda: True)
        kernels.refresh()
        served = kernels._SERVED
        assert set(served) == {"rms_adaln"} and served["rms_adaln"].backends == ("cuda",)
        assert kernels.fused("rms_adaln", torch.device("cuda"), torch.bfloat16)
        assert not kernels.fused("rms_adaln", torch.device("cuda"), torch.float32)
        assert not kernels.fused("rms_adaln", torch.device("cpu"), torch.bfloat16)
        assert not kernels.fused("adaln", torch.device("cuda"), torch.bfloat16)  # eager only: ours
        assert not kernels.rope_fused("split", torch.device("cuda"), torch.bfloat16)
        with kernels.use_kernels("ours"):
            assert not kernels.fused("rms_adaln", torch.device("cuda"), torch.bfloat16)
    finally:
        monkeypatch.undo()
        kernels.refresh()


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="'fast' is not one of auto, ours, kitchen"):
        kernels.set_kernels("fast")
    assert kernels.KERNELS == "auto"


@needs
def test_per_block_compile_keeps_one_graph_with_the_kitchen_kernels():
    """comfy-kitchen's ops are custom ops: a compiled block (fullgraph) traces them, one graph for every block."""
    from torch._dynamo.utils import counters

    from ltx2_core.compile import compile_blocks

    model = demo_transformer(dataclasses.replace(TransformerConfig.tiny("2.0"), rope_type="interleaved"))
    with kernels.use_kernels("kitchen"), torch.no_grad():
        video, audio, run = demo_inputs(model, text_tokens=16)
        want = model(video, audio, run)
        torch._dynamo.reset()
        counters.clear()
        compile_blocks(model, backend="eager", fullgraph=True)
        got = model(video, audio, run)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])


class _ShardNorm(torch.nn.Module):
    """Stands for a tensor-parallel q/k norm (not `fusable`): it must run as it is."""

    def __init__(self, norm: QKNorm) -> None:
        super().__init__()
        self.norm = norm

    def forward(self, x):
        return self.norm(x)


@needs
@pytest.mark.parametrize("rope_type", ["interleaved", "split"])
def test_a_tensor_parallel_rank_keeps_its_heads_rotation_matrices(rope_type, calls):
    from ltx2_core.parallel.tensor_parallel import LocalHeadsRun

    heads, head_dim = 4, 16
    local = LocalHeadsRun(None, rank=1, world=2)._local(_tables(rope_type, torch.float32, heads=heads,
                                                                head_dim=head_dim))
    assert local.freqs.shape[2] == heads // 2
    torch.testing.assert_close(local.freqs, rotation_matrices(local.cos, local.sin, rope_type), rtol=0, atol=0)
    norm = _ShardNorm(QKNorm(heads // 2 * head_dim, 1e-6))
    with torch.no_grad():
        norm.norm.weight.normal_()
        x = _randn(1, 6, heads // 2 * head_dim, dtype=torch.float32)
        want = apply_rope(norm(x).unflatten(-1, (-1, head_dim)), local, rope_type)
        with kernels.use_kernels("kitchen"):
            got = kernels.qk_norm_rope(x, norm, local, rope_type, head_dim)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert "rms_rope1" not in calls and sum(calls.values()) == 1, calls
