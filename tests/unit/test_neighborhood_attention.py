"""The eager 3-D neighborhood attention: NATTEN's window (shifted inward at the borders, never clipped) against a
per-query loop, and against comfy-kitchen's `na3d` when an installed comfy-kitchen has it."""

from __future__ import annotations

import itertools

import pytest
import torch

from ltx2_core.model.video_vae.neighborhood_attention import eager_na3d, kitchen_available, na3d, window_starts

# (B, T, H, W, heads, head_dim), kernel: interior and borders, a box wider than one query block (16), kernel = axis
CASES = [((2, 5, 9, 11, 2, 16), (3, 7, 7)), ((1, 3, 20, 18, 1, 8), (3, 5, 5)), ((1, 6, 5, 33, 2, 8), (3, 5, 3))]


def _per_query(q, k, v, kernel):
    _, t, h, w, heads, dim = q.shape
    out = torch.empty_like(v)
    for i, j, m in itertools.product(range(t), range(h), range(w)):
        box = tuple(slice(s[x], s[x] + kk) for s, x, kk in zip(
            (window_starts(t, kernel[0]), window_starts(h, kernel[1]), window_starts(w, kernel[2])), (i, j, m), kernel))
        keys, values = k[:, box[0], box[1], box[2]].flatten(1, 3), v[:, box[0], box[1], box[2]].flatten(1, 3)
        weights = torch.einsum("bnd,bknd->bnk", q[:, i, j, m], keys).softmax(-1)
        out[:, i, j, m] = torch.einsum("bnk,bknd->bnd", weights, values)
    return out


def test_window_starts_shift_inward_at_the_borders():
    assert window_starts(7, 3) == [0, 0, 1, 2, 3, 4, 4]
    assert window_starts(5, 5) == [0] * 5


@pytest.mark.parametrize(("shape", "kernel"), CASES)
def test_eager_matches_a_per_query_loop(shape, kernel):
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(shape, generator=generator) for _ in range(3))
    # one softmax over the same keys, summed in another order
    torch.testing.assert_close(eager_na3d(q, k, v, kernel), _per_query(q, k, v, kernel), rtol=0, atol=1e-5)


@pytest.mark.skipif(not kitchen_available(), reason="comfy-kitchen with na3d (>= 0.2.40) is not installed")
@pytest.mark.parametrize(("shape", "kernel"), CASES)
def test_eager_matches_comfy_kitchen(shape, kernel):
    generator = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(shape, generator=generator) for _ in range(3))
    expected = na3d(q, k, v, kernel, use_kitchen=True)
    torch.testing.assert_close(na3d(q, k, v, kernel, use_kitchen=False), expected, rtol=0, atol=1e-5)


def test_an_axis_shorter_than_its_kernel_is_refused():
    q = torch.randn(1, 2, 8, 8, 1, 8)
    with pytest.raises(ValueError, match="needs .T, H, W. ≥ kernel"):
        na3d(q, q, q, (3, 3, 3))
