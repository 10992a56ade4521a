"""What a GPU worker's prompt encoder moves (`runtime.text_task._move_held`): every tensor it holds, a tied weight
once (it stays one tensor), nothing a pipeline rank dropped to `meta`. The CPU-only suite moves to `meta` to see it."""

from __future__ import annotations

import torch
from torch import nn

from ltx2_core.runtime.text_task import _move_held


def test_tied_weights_move_once_and_dropped_layers_stay_on_meta():
    model = nn.ModuleDict({"embed": nn.Embedding(4, 3), "head": nn.Linear(3, 4, bias=False),
                           "dropped": nn.Linear(3, 3), "norm": nn.BatchNorm1d(3)})
    model["head"].weight = model["embed"].weight  # tied, as Gemma's embeddings and logits
    model["dropped"].to("meta")
    dropped = model["dropped"].weight
    _move_held(model, torch.device("meta"), {})
    assert model["embed"].weight.is_meta and model["head"].weight is model["embed"].weight
    assert isinstance(model["embed"].weight, nn.Parameter) and model["norm"].running_mean.is_meta
    assert model["dropped"].weight is dropped  # not touched
    assert all(t.is_meta for t in (*model.parameters(), *model.buffers()))
