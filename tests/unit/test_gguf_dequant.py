"""Our torch dequantisation of every ggml type equals the `gguf` package's numpy dequantisation (≤ 1e-6)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")

from support.gguf_blocks import F16_FIELDS, random_blocks

from ltx2_core.quant.gguf_types import TYPES, dequantize

BLOCKS = 24


def _random_blocks(name: str, rng: np.random.Generator) -> np.ndarray:
    kind = next(t for t in TYPES.values() if t.name == name)
    return random_blocks(name, BLOCKS, kind.type_size, rng)


def _compare(raw: np.ndarray, qtype: gguf.GGMLQuantizationType, shape: tuple[int, ...]) -> None:
    expected = gguf.quants.dequantize(raw, qtype).reshape(shape)
    kind = TYPES[int(qtype)]
    ours = dequantize(torch.from_numpy(raw.view(np.uint8).copy()), kind, shape, torch.float32)
    assert ours.shape == shape
    assert np.isfinite(expected).all()
    np.testing.assert_allclose(ours.numpy(), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", sorted(F16_FIELDS))
def test_random_blocks_match_gguf(name: str) -> None:
    rng = np.random.default_rng(sum(map(ord, name)))
    qtype = gguf.GGMLQuantizationType[name]
    kind = TYPES[int(qtype)]
    raw = _random_blocks(name, rng).reshape(4, -1)
    _compare(raw, qtype, (4, BLOCKS // 4 * kind.block_size))


@pytest.mark.parametrize("name", sorted(F16_FIELDS) + ["F16", "BF16", "F32"])
def test_quantised_weights_match_gguf(name: str) -> None:
    """Blocks made by gguf's own quantize from a weight matrix (for the types it quantises)."""
    qtype = gguf.GGMLQuantizationType[name]
    weights = np.random.default_rng(0).standard_normal((3, 512)).astype(np.float32)
    try:
        raw = gguf.quants.quantize(weights, qtype)
    except NotImplementedError:
        pytest.skip(f"the gguf package has no quantize for {name} (random blocks cover it)")
    _compare(raw, qtype, (3, 512))
    if TYPES[int(qtype)].quantised:  # and the round trip is close to the weights: the test can tell types apart
        error = np.abs(gguf.quants.dequantize(raw, qtype) - weights).mean()
        assert 0 < error < 0.5


def test_every_named_type_is_known() -> None:
    named = {"F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K", "Q5_0", "Q5_1", "Q4_K", "Q4_0", "Q4_1", "Q3_K", "Q2_K"}
    assert named == {t.name for t in TYPES.values()}
    for kind in TYPES.values():
        assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(kind.id)] == (kind.block_size, kind.type_size)
        assert gguf.GGMLQuantizationType(kind.id).name == kind.name


@pytest.mark.parametrize("name", sorted(F16_FIELDS) + ["F16", "BF16", "F32"])
def test_the_layer_dequantises_without_reading_data_on_the_host(name: str) -> None:
    """A GGUFLinear on the meta device runs: its forward reads no value (no .item(), no sync in the sampler)."""
    from ltx2_core.quant.gguf import GGUFLinear

    kind = next(t for t in TYPES.values() if t.name == name)
    layer = GGUFLinear(512, 8, kind, device="meta", dtype=torch.float32)
    out = layer(torch.empty(2, 3, 512, device="meta", dtype=torch.bfloat16))
    assert out.shape == (2, 3, 8) and out.dtype == torch.bfloat16
