"""The tensors the package caches once per process stay real tensors when first made inside a fake-tensor mode (the
memory checks build the released-size vocoder and quantised layers under `FakeTensorMode`): a cached fake tensor
reached every later build, and a file written from it failed ("invalid shape, data type, or offset"), depending on
which test ran first."""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from ltx2_core.model.audio_vae import bigvgan
from ltx2_core.quant import nvfp4


def test_caches_made_inside_a_fake_tensor_mode_hold_real_tensors():
    makers = ((bigvgan._anti_alias_taps, ()), (nvfp4.blocked_index, (256, 8)), (nvfp4._e2m1, (torch.device("cpu"),)))
    for function, args in makers:
        function.cache_clear()
        with FakeTensorMode(allow_non_fake_inputs=True):
            function(*args)
        cached = function(*args)
        assert not isinstance(cached, FakeTensor), function.__name__
        assert cached.device.type == "cpu" and cached.numel() > 0
    torch.testing.assert_close(bigvgan._anti_alias_taps().sum(), torch.tensor(1.0), rtol=0, atol=1e-6)  # normalised


def test_the_vocoders_filter_is_float32_whatever_the_default_dtype_when_first_made():
    """Made first under a bf16 default (as `support.configs.bf16_built` builds the released sizes), the cached taps
    stay the reference's float32 ones; each module's copy takes the default dtype of its own build."""
    bigvgan._anti_alias_taps.cache_clear()
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.bfloat16)
        assert bigvgan._anti_alias_filter().dtype == torch.bfloat16
    finally:
        torch.set_default_dtype(previous)
    assert bigvgan._anti_alias_taps().dtype == torch.float32 and bigvgan._anti_alias_filter().dtype == previous
    fresh = bigvgan.kaiser_sinc_filter(cutoff=0.25, half_width=0.3)
    torch.testing.assert_close(bigvgan._anti_alias_filter(), fresh.to(previous), rtol=0, atol=0)  # one computation
