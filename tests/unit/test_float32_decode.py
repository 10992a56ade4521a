"""The float32 call of a module (`model.float32.in_float32`: cast for the block, each tensor back in its dtype after
it, also when the block raises) and what `runtime.float32_decode.float32_decode` accepts (its distributed checks:
tests/distributed/test_worker_hdr.py)."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.model.float32 import in_float32
from ltx2_core.runtime.float32_decode import float32_decode
from ltx2_core.model.video_vae.tiling import decode_video


def _module() -> torch.nn.Module:
    module = torch.nn.BatchNorm1d(3).to(torch.bfloat16)  # parameters and floating buffers, and an int buffer
    with torch.no_grad():
        module.weight.uniform_(-1, 1)
    return module


def test_a_module_is_float32_in_the_block_and_back_in_its_dtype_after_it():
    module = _module()
    weight, values = module.weight, module.weight.detach().clone()
    with in_float32(module):
        assert {t.dtype for t in (*module.parameters(), module.running_mean)} == {torch.float32}
        assert module.num_batches_tracked.dtype == torch.int64
    assert module.weight is weight and module.weight.dtype == torch.bfloat16 and torch.equal(module.weight, values)
    with pytest.raises(RuntimeError, match="inside"), in_float32(module):
        raise RuntimeError("inside")
    assert {t.dtype for t in (*module.parameters(), module.running_mean)} == {torch.bfloat16}


def test_only_the_workers_decode_is_made_float32():
    assert float32_decode(None) is None  # the host decodes here: decode_hdr casts there
    with pytest.raises(TypeError, match="runtime.WorkerDecode"):
        float32_decode(decode_video)
