"""A transformer whose blocks are slow (each sleeps first), to time how soon a cancel lands: here, or on workers
(`SlowFiles`, the demo's files with `layers` slow blocks, loaded by each worker process)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ltx2_core import ModelFiles, TransformerConfig
from ltx2_core.demo import demo_transformer
from ltx2_core.model.transformer import LTX2Transformer


def slow_blocks(model: LTX2Transformer, seconds: float, started: Callable[[int], None] | None = None) -> list:
    """Each block of `model` sleeps `seconds` before it runs, after telling `started(block index)`; returns the hook
    handles (`handle.remove()` makes them fast again)."""

    def hook(index: int):
        def before(module, args):
            if started is not None:
                started(index)
            time.sleep(seconds)
        return before

    return [block.register_forward_pre_hook(hook(index)) for index, block in enumerate(model.transformer_blocks)]


@dataclass(frozen=True)
class SlowFiles(ModelFiles):
    """The demo model's files (`version`) with a transformer of `layers` blocks that each sleep `block_seconds`."""

    layers: int = 8
    block_seconds: float = 0.3

    def transformer_config(self) -> TransformerConfig:
        return TransformerConfig.tiny(self.version, num_layers=self.layers)

    def load_transformer(self, device: torch.device | str = "cpu", dtype: torch.dtype | None = None,
                         parallelize=None) -> LTX2Transformer:
        model = demo_transformer(self.transformer_config()).to(device=device, dtype=dtype)
        if parallelize is not None:
            parallelize(model)
        slow_blocks(model, self.block_seconds)
        return model
