"""The tests' K-type quantiser (`support/gguf_quantise.py`, for the accuracy bench and the synthetic GGUF files):
its blocks are what the `gguf` package and our dequantiser read back, and the error shrinks with the bits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")

from ltx2_core.quant.gguf_types import TYPES, dequantize
from support.gguf_quantise import quantise_k

KINDS = {t.name: t for t in TYPES.values()}
# relative error of plain min-max quantisation of normal weights (llama.cpp's searched scales do better)
BOUND = {"Q6_K": 0.03, "Q5_K": 0.05, "Q4_K": 0.1, "Q3_K": 0.22, "Q2_K": 0.4}


def test_k_blocks_read_back_as_the_weights_within_the_types_error():
    x = np.random.default_rng(0).standard_normal((16, 512)).astype(np.float32)
    errors = []
    for name, bound in BOUND.items():
        blocks = quantise_k(x, name)
        assert blocks.shape == (16, 2 * KINDS[name].type_size)
        theirs = gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType[name]).reshape(x.shape)
        ours = dequantize(torch.from_numpy(blocks), KINDS[name], x.shape, torch.float32).numpy()
        np.testing.assert_array_equal(ours, theirs)
        errors.append(np.linalg.norm(theirs - x) / np.linalg.norm(x))
        assert errors[-1] < bound, name
    assert errors == sorted(errors)  # fewer bits, more error
