"""The attention backends (ltx2_core/model/transformer/attention_backends.py) and their selection (attention_select):
auto's choice per device capability table (an H100, an H200, a Blackwell card, an A100, no GPU), never an 8-bit one;
named backends checked at set-up with an error naming the fix; every backend that runs on the CPU equal to fp32 math
attention on the transformer's shape classes; the optional packages' glue (layout, batch broadcast, compile) on CPU
stand-ins; and comfy-kitchen's 8-bit attention against the reference where its CUDA kernel runs."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.model.transformer import attention_backends as backends
from ltx2_core.model.transformer import attention_select as select
from ltx2_core.model.transformer.attention import attention_bias

H100 = H200 = {"type": "cuda", "capability": (9, 0), "packages": frozenset()}  # one table: the same SM90 class
B200 = {"type": "cuda", "capability": (10, 0), "packages": frozenset()}
A100 = {"type": "cuda", "capability": (8, 0), "packages": frozenset()}
NO_GPU = {"type": "cpu", "capability": None, "packages": frozenset()}
EVERY_PACKAGE = frozenset({"flash4", "sage", "kitchen_int8"})
BF16, FP32 = torch.bfloat16, torch.float32
EIGHT_BIT = {name for name, b in backends.BACKENDS.items() if not b.exact}


def _with(table: dict, packages: frozenset[str] = EVERY_PACKAGE) -> dict:
    return table | {"packages": packages}


@pytest.mark.parametrize("table, masked, want", [
    (H100, False, "cudnn"), (H100, True, "efficient"), (_with(H100), False, "flash4"), (_with(H100), True, "efficient"),
    (H200, False, "cudnn"), (_with(B200), False, "flash4"), (B200, False, "cudnn"), (B200, True, "efficient"),
    (_with(A100), False, "flash"), (_with(A100), True, "efficient"), (NO_GPU, False, "flash"), (NO_GPU, True, "flash"),
])
def test_auto_takes_the_first_exact_backend_of_the_devices_ranking_that_serves_the_call(table, masked, want):
    for head_dim in (128, 64):  # video and audio heads
        assert select.choose("auto", table, BF16 if table["type"] == "cuda" else FP32, head_dim, masked).name == want


def test_auto_serves_every_class_and_never_takes_an_8_bit_backend():
    ranking = {key: ("sage", "kitchen_int8", *row) for key, row in select.RANKING.items()}  # even ranked first
    for table in (_with(H100), _with(B200), _with(A100), NO_GPU, {"type": "mps", "packages": frozenset()}):
        for dtype in (BF16, torch.float16, FP32):
            for head_dim, masked in ((128, False), (64, True), (80, False)):
                choice = select.choose("auto", table, dtype, head_dim, masked, ranking)
                assert choice.exact and choice.name not in EIGHT_BIT
                assert choice.problem(table, dtype, head_dim, masked) is None


def test_fp32_on_cuda_takes_the_memory_efficient_backend_and_a_card_without_flash_its_own():
    assert select.choose("auto", _with(H100), FP32, 128, False).name == "efficient"
    turing = {"type": "cuda", "capability": (7, 5), "packages": frozenset()}
    assert select.choose("auto", turing, BF16, 128, False).name == "efficient"
    amd = {"type": "cuda", "capability": (9, 4), "hip": True, "packages": EVERY_PACKAGE}
    assert select.choose("auto", amd, BF16, 128, False).name == "flash"
    assert select.choose("auto", amd, BF16, 128, True).name == "efficient"


def test_a_named_backend_runs_where_it_serves_and_a_masked_call_it_cannot_take_goes_to_autos_choice():
    table = _with(H100)
    assert select.choose("sage", table, BF16, 128, False).name == "sage"
    assert select.choose("sage", table, BF16, 128, True).name == "efficient"  # SageAttention takes no mask
    assert select.choose("kitchen_int8", table, BF16, 128, True).name == "kitchen_int8"
    assert select.choose("flash", table, BF16, 64, True).name == "efficient"
    assert select.choose("math", table, BF16, 64, True).name == "math"


@pytest.mark.parametrize("mode, table, dtype, dims, message", [
    ("flash4", H100, BF16, (128, 64), r"flash-attn-4 is not installed.*pip install flash-attn-4.*'auto'"),
    ("flash4", _with(A100), BF16, (128,), r"compute capability 9.0 to below 11.0, this GPU has 8.0"),
    ("cudnn", NO_GPU, None, (), r"runs on cuda, not cpu.*one of sdpa, math, flash$"),
    ("sage", _with(H100), BF16, (80,), r"does not take head size 80"),
    ("sage", H100, None, (), r"pip install sageattention"),
    ("flash", _with(H100), FP32, (128,), r"takes bfloat16, float16 on cuda, not float32.*efficient"),
    ("kitchen_int8", NO_GPU, None, (), r"runs on cuda, not cpu"),
    ("fastest", NO_GPU, None, (), r"'fastest' is not one of auto, sdpa, math"),
])
def test_a_backend_that_cannot_serve_is_refused_at_set_up_naming_the_install_or_the_alternatives(
        mode, table, dtype, dims, message):
    with pytest.raises(ValueError, match=message):
        select.check_attention(mode, table, dtype, dims)


def test_set_attention_checks_the_device_first_and_keeps_the_mode_when_it_refuses():
    assert select.ATTENTION == "auto"
    with pytest.raises(ValueError, match="cudnn.*cannot run here"):
        select.set_attention("cudnn", "cpu", FP32, (128, 64))
    assert select.ATTENTION == "auto"
    with select.use_attention("math", "cpu", FP32, (128, 64)):
        assert select.ATTENTION == "math" and select.chosen("cpu", FP32, 128, True) == "math"
    assert select.ATTENTION == "auto" and select.chosen("cpu", FP32, 128, True) == "flash"


def _inputs(dtype, q_tokens, k_tokens, heads, head_dim, batch=2, k_batch=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, q_tokens, heads, head_dim, generator=g)
    k, v = (torch.randn(k_batch or batch, k_tokens, heads, head_dim, generator=g) for _ in range(2))
    return q.to(dtype), k.to(dtype), v.to(dtype)


def _reference(q, k, v, mask):
    """fp32 math attention (the float64 softmax of q·kᵀ/√d)."""
    k, v = backends.batched(q, k, v)
    q, k, v = (t.double().transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask.double()
    return (scores.softmax(-1) @ v).transpose(1, 2).float()


def _shape_classes(dtype):
    """(name, q, k, v, mask) at the transformer's shape classes, few tokens: video self-attention (head size 128),
    with the keyframe / IC-LoRA bias, text cross-attention (K/V once per run: batch 1), audio self-attention and the
    audio<->video cross-attentions (head size 64), and Ulysses' key-padding mask."""
    q, k, v = _inputs(dtype, 96, 96, 4, 128)
    weights = torch.rand(1, 96, 96, generator=torch.Generator().manual_seed(1))
    weights[:, :, 80:] = 0.0  # never attended, as a control's tokens at attention strength 0
    yield "video self", q, k, v, None
    yield "video self, bias mask", q, k, v, attention_bias(weights, dtype)
    yield "text cross", *_inputs(dtype, 96, 24, 4, 128, k_batch=1, seed=2), None
    yield "audio self", *_inputs(dtype, 20, 20, 4, 64, seed=3), None
    yield "audio to video", *_inputs(dtype, 96, 20, 4, 64, seed=4), None
    yield "video to audio, key padding", *_inputs(dtype, 20, 96, 4, 64, seed=5), \
        (torch.arange(96) < 90).view(1, 1, 1, -1)


CPU_BACKENDS = [name for name, b in backends.BACKENDS.items() if b.problem(NO_GPU, FP32, 128, True) is None]
# bounds on the largest difference from fp32 math attention, the inputs unit normal (outputs |o| < 3): fp32 to its
# rounding; bf16: the inputs and the output rounded to bf16 (8 bits): about one bf16 step (2^-7) at |o| < 2
TOLERANCE = {FP32: 5e-6, BF16: 1e-2}  # measured (2 threads, AVX-512): 1.7e-6 and 4.9e-3


@pytest.mark.parametrize("dtype", [FP32, BF16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", CPU_BACKENDS)
def test_every_backend_that_runs_on_the_cpu_computes_fp32_math_attention(name, dtype):
    assert set(CPU_BACKENDS) == {"sdpa", "math", "flash"}
    for what, q, k, v, mask in _shape_classes(dtype):
        got = backends.BACKENDS[name].run(q, k, v, mask)
        assert got.shape == q.shape and got.dtype == dtype, what
        want = _reference(q.float(), k.float(), v.float(), mask if mask is None or mask.dtype == torch.bool
                          else mask.float())
        assert (got.float() - want).abs().max().item() < TOLERANCE[dtype], (name, what)


def test_the_switch_runs_the_chosen_backend_and_auto_on_the_cpu_is_what_sdpa_ran_before():
    for what, q, k, v, mask in _shape_classes(FP32):
        # auto takes SDPA's CPU flash kernel, the one an unpinned SDPA runs here: the same numbers as before (a pure
        # copy of the same kernel's work), except K/V of batch 1, which SDPA ran through its math backend
        if k.shape[0] == q.shape[0]:
            assert torch.equal(select.attend(q, k, v, mask), backends.sdpa(q, k, v, mask)), what
        torch.testing.assert_close(select.attend(q, k, v, mask), backends.sdpa(q, k, v, mask), atol=2e-6, rtol=0)
        with select.use_attention("math"):
            assert torch.equal(select.attend(q, k, v, mask), backends.BACKENDS["math"].run(q, k, v, mask)), what


def test_the_switch_compiles_into_one_graph():
    q, k, v = _inputs(FP32, 16, 16, 2, 8)
    mask = torch.zeros(1, 1, 16, 16)
    compiled = torch.compile(lambda q, m: select.attend(q, k, v, m) + select.attend(q, k, v), backend="eager",
                             fullgraph=True)
    torch.testing.assert_close(compiled(q, mask), select.attend(q, k, v, mask) + select.attend(q, k, v))


def test_a_compiled_forward_keeps_its_graph_run_after_run():
    """The choices are made at set-up (`use_attention` with the device, dtype and head sizes), so a compiled forward
    finds them made: no recompile from one run to the next; another mode compiles once, and back needs none."""
    from torch._dynamo.testing import CompileCounter

    q, k, v = _inputs(FP32, 16, 16, 2, 8)
    mask = torch.zeros(1, 1, 16, 16)
    counter = CompileCounter()
    compiled = torch.compile(lambda q, m: select.attend(q, k, v, m) + select.attend(q, k, v), backend=counter)
    for mode, graphs in (("auto", 1), ("auto", 1), ("math", 2), ("auto", 2)):
        with select.use_attention(mode, "cpu", FP32, (8,)):
            compiled(q, mask)
        assert counter.frame_count == graphs, mode


def _stand_in(calls: list, layout: str):
    """A CPU stand-in for an optional package's function (math attention in that package's layout)."""

    def run(q, k, v, **kwargs):
        calls.append((tuple(q.shape), tuple(k.shape), kwargs))
        if layout == "BHSD":
            return _reference(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                              kwargs.get("attn_mask")).transpose(1, 2).to(q.dtype)
        out = _reference(q, k, v, None).to(q.dtype)
        return (out, None) if layout == "BSHD+lse" else out

    return run


@pytest.mark.parametrize("name, layout, kwargs", [("flash4", "BSHD+lse", {}),
                                                  ("sage", "BSHD", {"tensor_layout": "NHD", "is_causal": False}),
                                                  ("kitchen_int8", "BHSD", {"attn_mask": None})])
def test_the_optional_packages_glue_keeps_the_layout_and_broadcasts_the_batch(monkeypatch, name, layout, kwargs):
    calls: list = []
    monkeypatch.setitem(backends.IMPLEMENTATIONS, name, _stand_in(calls, layout))
    q, k, v = _inputs(FP32, 12, 8, 2, 64, batch=3, k_batch=1)
    run = backends.BACKENDS[name].run
    torch.testing.assert_close(run(q, k, v), _reference(q, k, v, None), atol=2e-6, rtol=0)
    expected_q = (3, 12, 2, 64) if layout != "BHSD" else (3, 2, 12, 64)
    assert calls[-1] == (expected_q, (3, *calls[-1][1][1:]), kwargs)
    compiled = torch.compile(run, backend="eager", fullgraph=True)  # a custom op (or comfy-kitchen's): one graph
    torch.testing.assert_close(compiled(q, k, v), _reference(q, k, v, None), atol=2e-6, rtol=0)


# comfy-kitchen 0.2.40's int8 attention has no eager (CPU) implementation: it runs only where its CUDA kernel
# loads. Bound from its design (int8 q, k, v with fp32 softmax): the GPU suite's `attention` section measures it.
KITCHEN_INT8_BOUND = 0.05  # largest difference relative to the output's largest magnitude


def test_kitchen_int8_runs_only_where_its_cuda_kernel_loads():
    with pytest.raises(ValueError, match="kitchen_int8.*runs on cuda, not cpu"):
        select.check_attention("kitchen_int8", select.device_table("cpu"))


@pytest.mark.skipif(not torch.cuda.is_available() or "kitchen_int8" not in select.device_table("cuda")["packages"],
                    reason="comfy-kitchen's int8 attention needs its CUDA kernel")
def test_kitchen_int8_attention_error_is_within_its_stated_bound():  # pragma: no cover - GPU only
    for what, q, k, v, mask in _shape_classes(BF16):
        q, k, v = (t.cuda() for t in (q, k, v))
        mask = None if mask is None else mask.cuda()
        want = _reference(q.float(), k.float(), v.float(), mask if mask is None or mask.dtype == torch.bool
                          else mask.float())
        got = backends.BACKENDS["kitchen_int8"].run(q, k, v, mask).float()
        assert (got - want).abs().max().item() <= KITCHEN_INT8_BOUND * want.abs().max().item(), what
