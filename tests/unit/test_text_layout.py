"""The memory plan's choice of how a multi-rank run encodes its prompts (`memory.text_layout`, issue 38, item 2): a
replica per rank when it fits, else Gemma's layers cut into a pipeline that fits every rank, else a refusal naming
the fix; Gemma 4's KV sharing keeps the sharing layers on one rank. Figures at Gemma 3 12B's size (bf16)."""

from __future__ import annotations

import pytest

from ltx2_core.memory.plan import MemoryPlanError
from ltx2_core.memory.text_layout import GB, TextBytes, plan_text, stage_bytes
from ltx2_core.model.text.gemma4 import GEMMA4
from ltx2_core.parallel.gemma_pipeline import allowed_cuts
from support.gemma4 import gemma4_config

# Gemma 3 12B in bf16: 48 layers of 0.44 GiB, 2.0 GiB of embeddings, the 2.3 projection's 3 GiB; 1024 × 3840 states
GEMMA3_12B = TextBytes(layers=(int(0.44 * GB),) * 48, embeddings=2 * GB, head=3 * GB, state=1024 * 3840 * 2)


def test_a_replica_that_fits_encodes_the_prompts_on_different_ranks():
    assert plan_text(GEMMA3_12B, [80 * GB] * 2, prompts=2).mode == "prompts"
    assert plan_text(GEMMA3_12B, [80 * GB] * 2, prompts=1).mode == "one"
    assert plan_text(GEMMA3_12B, [80 * GB], prompts=2).mode == "one"


def test_where_no_replica_fits_the_layers_are_cut_to_fit_each_rank():
    free = [9 * GB, 12 * GB, 12 * GB, 12 * GB]
    layout = plan_text(GEMMA3_12B, free, prompts=2)
    assert layout.mode == "pipeline" and len(layout.bounds) == 4
    assert layout.bounds[0][0] == 0 and layout.bounds[-1][1] == 48
    assert all(a < b for a, b in layout.bounds) and all(b == a for (_, b), (a, _) in zip(layout.bounds,
                                                                                           layout.bounds[1:]))
    assert all(n <= f for n, f in zip(layout.rank_bytes, free))
    assert layout.rank_bytes[0] == stage_bytes(GEMMA3_12B, *layout.bounds[0], False, 2)
    # the smaller first device (it also holds the embeddings) gets fewer layers than the middle ones
    assert layout.bounds[0][1] - layout.bounds[0][0] < layout.bounds[1][1] - layout.bounds[1][0]
    assert "pipeline over 4 ranks" in layout.describe() and "rank 3: layers" in layout.describe()


def test_nothing_fits_names_how_many_ranks_would():
    with pytest.raises(MemoryPlanError, match=r"launch at least 3 ranks \(torchrun --nproc-per-node 3\)"):
        plan_text(GEMMA3_12B, [12 * GB] * 2, prompts=2)
    with pytest.raises(MemoryPlanError, match="no number of such devices"):
        plan_text(GEMMA3_12B, [0.3 * GB] * 2, prompts=2)


def test_gemma4_kv_sharing_layers_stay_with_the_layer_that_stores_their_keys():
    values = GEMMA4.text_values(gemma4_config(num_hidden_layers=8, layer_types=None, num_kv_shared_layers=2,
                                              use_double_wide_mlp=True), "test")
    model = GEMMA4.build(values)
    modes = model.config.kv_modes
    cuts = allowed_cuts(model)
    last_store = max(i for i, m in enumerate(modes) if m == "store")
    assert max(cuts) <= min(i for i, m in enumerate(modes) if m == "store") <= last_store
    sizes = TextBytes((GB,) * 8, embeddings=0, head=4 * GB, state=0)  # the head on the last rank
    assert plan_text(sizes, [8 * GB] * 2, prompts=2).bounds == ((0, 6), (6, 8))  # balanced: 6 | 2 + head
    # that cut would part layer 6 from layer 4, whose keys it reuses: the nearest allowed one
    assert plan_text(sizes, [8 * GB] * 2, prompts=2, cuts=cuts).bounds == ((0, 4), (4, 8))
    assert allowed_cuts(GEMMA4.build(GEMMA4.text_values(gemma4_config(), "test"))) is None
