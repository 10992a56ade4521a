"""Megatron tensor parallelism as a pass over the single-device transformer (functional collectives).

In all six attentions of every block Q, K, V and the gate logits are column-parallel (each rank keeps the output
features of its contiguous share of the heads) and `to_out.0` is row-parallel; in both feed-forwards `net.0.proj` is
column-parallel and `net.2` row-parallel, so the hidden activation stays sharded through GELU. No all-gather is ever
needed: a row-parallel layer all-reduces its partial output (then adds its bias once), and each q/k RMSNorm, which
spans all heads, all-reduces one fp32 sum of squares. Per block: 6 × 3 + 2 = 20 all-reduces. RoPE tables are cut to
the local heads once per run, in `prepare_run`. Parameter names stay the checkpoint's, with local shapes.

Works on a model with weights (each rank slices them) or on the `meta` model before a sharded load
(`load_transformer(..., parallelize=...)` reads each rank's shards only).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F
from torch import nn

from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.loader.safetensors_file import Shard
from ltx2_core.model.transformer.attention import Attention
from ltx2_core.quant.registry import format_of
from ltx2_core.types import Rope, RunConstants

ATTENTIONS = ("attn1", "attn2", "audio_attn1", "audio_attn2", "audio_to_video_attn", "video_to_audio_attn")
FEED_FORWARDS = ("ff", "audio_ff")
COLUMN = ("to_q", "to_k", "to_v", "to_gate_logits")
ALL_REDUCES_PER_BLOCK = 3 * len(ATTENTIONS) + len(FEED_FORWARDS)


def _share(size: int, rank: int, world: int) -> slice:
    if size % world:
        raise ValueError(f"tensor parallel degree {world} must divide {size}; pick a tp that divides the head count")
    part = size // world
    return slice(rank * part, (rank + 1) * part)


def _param(tensor: torch.Tensor) -> nn.Parameter:
    return nn.Parameter(tensor.detach().clone() if tensor.device.type != "meta" else tensor, requires_grad=False)


def column_parallel_(linear: nn.Linear, rows: slice) -> None:
    """Keeps the output features `rows` of `linear` (in place)."""
    linear.weight = _param(linear.weight[rows])
    if linear.bias is not None:
        linear.bias = _param(linear.bias[rows])
    linear.out_features = rows.stop - rows.start


class RowParallelLinear(nn.Module):
    """The input features `cols` of a linear layer: partial products all-reduced, the bias added once after. A
    quantised layer keeps its shard in its format with the scales its format's TP rule keeps whole (their state-dict
    names, e.g. fp8's per-tensor scale) and is dequantised per call."""

    def __init__(self, linear: nn.Linear, cols: slice, group: dist.ProcessGroup) -> None:
        super().__init__()
        self.weight = _param(linear.weight[:, cols])
        self.bias = None if linear.bias is None else _param(linear.bias)
        self.group = group
        fmt = format_of(linear)
        for name, scale in ({} if fmt is None else fmt.shard_scales(linear)).items():
            self.register_buffer(name, scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fmt = format_of(self)  # asked per call: `dequantize_model` may turn the shard into a plain one
        weight = self.weight if fmt is None else fmt.dequantize(self, x.dtype)
        out = funcol.all_reduce(F.linear(x, weight), "sum", self.group)
        return out if self.bias is None else out + self.bias.to(out.dtype)


class ShardedQKNorm(nn.Module):
    """RMSNorm across all heads of a column-sharded projection: the local features' fp32 sum of squares is
    all-reduced, then each rank normalises its own features."""

    def __init__(self, weight: torch.Tensor, width: int, eps: float, group: dist.ProcessGroup) -> None:
        super().__init__()
        self.weight, self.width, self.eps, self.group = _param(weight), width, eps, group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        squares = funcol.all_reduce(x.float().pow(2).sum(-1, keepdim=True), "sum", self.group)
        return (x.float() * torch.rsqrt(squares / self.width + self.eps)).to(x.dtype) * self.weight


def _attention_(attn: Attention, prefix: str, rank: int, world: int, group: dist.ProcessGroup) -> dict[str, Shard]:
    heads = attn.to_q.out_features // attn.head_dim
    local = _share(heads, rank, world)
    features = slice(local.start * attn.head_dim, local.stop * attn.head_dim)
    shards = {}
    for name in COLUMN:
        linear = getattr(attn, name)
        if linear is not None:
            rows = local if name == "to_gate_logits" else features
            column_parallel_(linear, rows)
            shards |= {f"{prefix}{name}.{p}": Shard(0, rows) for p in ("weight", "bias")
                       if getattr(linear, p) is not None}
    for name in ("q_norm", "k_norm"):
        norm = getattr(attn, name)
        setattr(attn, name, ShardedQKNorm(norm.weight[features], norm.weight.shape[0], norm.eps, group))
        shards[f"{prefix}{name}.weight"] = Shard(0, features)
    attn.to_out[0] = RowParallelLinear(attn.to_out[0], features, group)
    return shards | {f"{prefix}to_out.0.weight": Shard(1, features)}


def _feed_forward_(ff: nn.Module, prefix: str, rank: int, world: int, group: dist.ProcessGroup) -> dict[str, Shard]:
    hidden = _share(ff.net[0].proj.out_features, rank, world)
    column_parallel_(ff.net[0].proj, hidden)
    ff.net[2] = RowParallelLinear(ff.net[2], hidden, group)
    shards = {f"{prefix}net.0.proj.weight": Shard(0, hidden), f"{prefix}net.2.weight": Shard(1, hidden)}
    if ff.net[0].proj.bias is not None:  # LTX-2.5's feed-forwards have none
        shards[f"{prefix}net.0.proj.bias"] = Shard(0, hidden)
    return shards


class LocalHeadsRun:
    """`prepare_run` of a tensor-parallel model: the full run constants, with every RoPE table cut to this rank's
    heads (once per run)."""

    def __init__(self, prepare_run, rank: int, world: int) -> None:
        self.prepare_run, self.rank, self.world = prepare_run, rank, world

    def __call__(self, *args, **kwargs) -> RunConstants:
        run = self.prepare_run(*args, **kwargs)
        if run.video_rope is None:  # an audio-only run
            raise ValueError("text to audio runs on one GPU; load the model without tensor parallelism")
        ropes = {name: self._local(getattr(run, name)) for name in
                 ("video_rope", "audio_rope", "video_cross_rope", "audio_cross_rope")}
        return run._replace(**ropes)

    def _local(self, rope: Rope) -> Rope:
        # split tables are (B, T, heads, head_dim/2); interleaved ones (B, T, heads·head_dim): both by heads
        dim = 2 if rope.cos.dim() == 4 else -1
        part = _share(rope.cos.shape[dim], self.rank, self.world)
        index = (slice(None),) * (dim % rope.cos.dim()) + (part,)
        # comfy-kitchen's rotation matrices (B, T, heads, head_dim/2, 2, 2) by the same heads (`kernels.py`)
        freqs = None if rope.freqs is None or dim != 2 else rope.freqs[index]
        return Rope(rope.cos[index], rope.sin[index], freqs)


def tensor_parallel(model: LTX2Transformer, group: dist.ProcessGroup | None = None) -> dict[str, Shard]:
    """Shards `model` in place over the ranks of `group` (default: all); returns which part of each sharded
    parameter (state-dict name) this rank holds, what a sharded load reads from the file."""
    group = group or dist.group.WORLD
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    shards = {}
    for index, block in enumerate(model.transformer_blocks):
        for name in ATTENTIONS:
            shards |= _attention_(getattr(block, name), f"transformer_blocks.{index}.{name}.", rank, world, group)
        for name in FEED_FORWARDS:
            shards |= _feed_forward_(getattr(block, name), f"transformer_blocks.{index}.{name}.", rank, world, group)
    model.prepare_run = LocalHeadsRun(model.prepare_run, rank, world)
    return shards
