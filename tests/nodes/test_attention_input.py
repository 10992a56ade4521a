"""The model loaders' `attention` input (docs/attention.md): a backend that cannot run on the device is refused before
anything loads, naming the alternatives; a named one runs while the model samples (and only then), computing what
auto computes."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from ltx2_core.model.transformer import attention_backends, attention_select
from support.node_calls import node


def test_a_backend_the_device_lacks_is_refused_before_loading(files):
    with pytest.raises(ValueError, match=r"attention 'cudnn' .* cannot run here: it runs on cuda, not cpu; use 'auto'"):
        node("LTX2CheckpointLoader", files["checkpoint"], "auto", "cpu", attention="cudnn", unique_id="attention-1")
    with pytest.raises(ValueError, match=r"pip install flash-attn-4|runs on cuda, not cpu"):
        node("LTX2CheckpointLoader", files["checkpoint"], "auto", "cpu", attention="flash4", unique_id="attention-1")


def test_the_named_backend_runs_while_the_model_samples(loaded, files, monkeypatch):
    here, _, conditioning, guidance = loaded
    calls = []
    math = attention_backends.BACKENDS["math"]

    def spy(q, k, v, mask=None):
        calls.append(attention_select.ATTENTION)
        return math.run(q, k, v, mask)

    monkeypatch.setitem(attention_backends.BACKENDS, "math", replace(math, run=spy))
    (with_math,) = node("LTX2CheckpointLoader", files["checkpoint"], "auto", "cpu", attention="math",
                        unique_id="attention-2")
    (latent,) = node("LTX2EmptyLatent", 96, 64, 9, 24.0)
    want, got = (node("LTX2Sampler", m, conditioning, latent, 3, 2, "ltx2", guidance=guidance)[0]
                 for m in (here, with_math))
    assert calls and set(calls) == {"math"}  # every attention call of the second run, none of the first
    assert attention_select.ATTENTION == "auto"  # back to the default after the run
    # fp32: the math and flash kernels round differently (attention alone: 2e-6), through two steps of the model
    torch.testing.assert_close(got.video, want.video, atol=1e-4, rtol=0)
    torch.testing.assert_close(got.audio, want.audio, atol=1e-4, rtol=0)
