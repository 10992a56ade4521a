"""Our Gemma 4 text model against transformers' `Gemma4UnifiedModel` (what ltx-core 1.2.0 runs) in this Python, on
the config variants the released 12B may use and the parity test's file does not: values sharing the keys'
projection (`attention_k_eq_v`, with their own K/V head count), layers reusing earlier layers' K/V (with the
double-wide MLP), bidirectional attention, and the full layers' sizes given per layer. Same random weights, left
padded batch longer than the sliding window, fp32: every hidden state."""

from __future__ import annotations

import pytest
import torch

from ltx2_core.model.text.gemma4 import GEMMA4
from support.gemma4 import gemma4_config

pytest.importorskip("transformers.models.gemma4_unified", reason="transformers 5 has Gemma 4")

VARIANTS = {
    "released-file": {},
    "k-eq-v": {"attention_k_eq_v": True, "num_global_key_value_heads": 1},
    "kv-shared": {"num_hidden_layers": 8, "layer_types": None, "num_kv_shared_layers": 2,
                  "use_double_wide_mlp": True},
    "bidirectional": {"use_bidirectional_attention": "all"},
}


def _reference(config: dict):
    from transformers import CONFIG_MAPPING, AutoModelForImageTextToText

    return AutoModelForImageTextToText.from_config(CONFIG_MAPPING["gemma4_unified"].from_dict(config)).eval()


@pytest.mark.parametrize("variant", VARIANTS)
def test_hidden_states_equal_transformers(variant):
    config = gemma4_config(**VARIANTS[variant])
    reference = _reference(config)
    if variant == "bidirectional":  # per layer, as transformers writes it back
        config = {**config, "text_config": reference.config.text_config.to_dict()}
    ours = GEMMA4.build(GEMMA4.text_values(config, variant))
    generator = torch.Generator().manual_seed(7)
    state = {}
    for key, value in ours.state_dict().items():
        noise = torch.randn(value.shape, generator=generator)
        state[key] = 1 + 0.3 * noise if key.endswith(("norm.weight", "layer_scalar")) else 0.3 * noise
    reference.model.language_model.load_state_dict(state, strict=True)  # also: our names are transformers'
    ours.load_state_dict(state, strict=True, assign=True)
    GEMMA4.materialize_buffers(ours, "cpu")
    ids = torch.randint(4, 300, (2, 12), generator=generator)
    mask = torch.ones(2, 12, dtype=torch.int64)
    mask[0, :5] = 0
    want = reference.model(input_ids=ids, attention_mask=mask, output_hidden_states=True, use_cache=False)
    got = GEMMA4.hidden_states(ours, ids, mask)
    assert len(got) == len(want.hidden_states) == ours.config.num_hidden_layers + 1
    for g, w in zip(got, want.hidden_states):
        torch.testing.assert_close(g, w, atol=1e-5, rtol=1e-5)
