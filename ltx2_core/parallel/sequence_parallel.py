"""Ulysses sequence parallelism over the video tokens, as a pass over the single-device transformer.

Each rank of the `sp` group keeps a contiguous 1/sp of the video tokens (padded to a multiple of sp; the padding is
masked out as keys and dropped from the output); audio and text are replicated. Per block:

* video self-attention: ONE all-to-all turns the local tokens × all heads of q, k, v (stacked) into all tokens ×
  1/sp of the heads, attention runs there, and ONE all-to-all brings the output back;
* text cross-attention and audio→video attention stay local (their keys are replicated);
* video→audio attention gathers the keys and values of all video tokens (ONE all-gather);

plus one all-gather of the video output per forward. Everything positional is computed once per run in the layout
it is used in (the video RoPE tables cut to the local tokens in `prepare_run`): no collective touches positions.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn.functional as F

from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.model.transformer.attention_select import attend
from ltx2_core.model.transformer.perturbations import BatchPerturbations
from ltx2_core.types import Rope, RunConstants, StreamInput

COLLECTIVES_PER_BLOCK = 3  # all-to-all in and out of video self-attention, all-gather of the v2a keys and values


class _Layout:
    """The run's token layout, shared by the forward and the attention functions (set once per run)."""

    def __init__(self, rank: int, world: int, group: dist.ProcessGroup) -> None:
        self.rank, self.world, self.group = rank, world, group
        self.tokens = self.padded = 0
        self.key_mask: torch.Tensor | None = None  # (1, 1, 1, padded) True for real tokens; None without padding

    def set_tokens(self, tokens: int, device: torch.device) -> None:
        self.tokens, self.padded = tokens, -(-tokens // self.world) * self.world
        self.key_mask = None if self.padded == tokens else (
            torch.arange(self.padded, device=device) < tokens).view(1, 1, 1, -1)

    def attention_mask(self, mask: torch.Tensor | None, video_queries: bool) -> torch.Tensor | None:
        """The mask for attention over the padded video keys: `mask` (bool, (.., queries, video tokens), over the
        real tokens as `AttentionFunction` takes it) with the padding keys shut out and, when the queries are the
        padded video tokens, padding queries that attend to every key (their rows are dropped); no mask: the key
        mask; a float bias (the video self-attention's, already over the padded tokens): as it is."""
        if mask is None:
            return self.key_mask
        if mask.is_floating_point():  # the run's additive bias, padded over all tokens once by `LocalTokensRun`
            return mask
        if self.padded == self.tokens:
            return mask
        missing = self.padded - self.tokens
        mask = F.pad(mask, (0, missing), value=False)
        if video_queries and mask.shape[-2] == self.tokens:
            mask = F.pad(mask, (0, 0, 0, missing), value=True)
        return mask

    def pad_weights(self, weights: torch.Tensor) -> torch.Tensor:
        """Attention weights (1, tokens, tokens) over the padded tokens: padding keys weigh 0 (never attended),
        padding queries 1 to every real key (their rows are dropped)."""
        missing = self.padded - self.tokens
        if missing == 0:
            return weights
        weights = F.pad(weights, (0, missing), value=0.0)
        return F.pad(weights, (0, 0, 0, missing), value=1.0)

    @property
    def local(self) -> slice:
        size = self.padded // self.world
        return slice(self.rank * size, (self.rank + 1) * size)

    def pad(self, x: torch.Tensor, dim: int) -> torch.Tensor:
        """`x` with its token dim `dim` padded (repeating the last token) to the padded count."""
        missing = self.padded - x.shape[dim]
        if missing == 0:
            return x
        last = x.narrow(dim, x.shape[dim] - 1, 1)
        return torch.cat([x, last.expand(*(missing if d == dim % x.dim() else -1 for d in range(x.dim())))], dim)


def _gather_tokens(x: torch.Tensor, dim: int, group: dist.ProcessGroup) -> torch.Tensor:
    """`x` concatenated over the ranks along its token dim `dim` (one all-gather, on dim 0 as the op requires)."""
    return funcol.all_gather_single(x.movedim(dim, 0).contiguous(), 0, group).movedim(0, dim)


class UlyssesAttention:
    """Video self-attention on (B, local tokens, heads, head_dim) through all tokens × heads/sp."""

    def __init__(self, layout: _Layout) -> None:
        self.layout = layout

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 mask: torch.Tensor | None = None) -> torch.Tensor:
        world, group = self.layout.world, self.layout.group
        batch, local, heads, dim = q.shape
        qkv = torch.stack([q, k, v]).unflatten(3, (world, heads // world))  # (3, B, Tl, sp, H/sp, d)
        sent = qkv.permute(3, 0, 1, 2, 4, 5).contiguous()  # by destination rank (head share)
        got = funcol.all_to_all_single(sent, None, None, group)  # by source rank (token share)
        q, k, v = got.permute(1, 2, 0, 3, 4, 5).reshape(3, batch, world * local, heads // world, dim)
        out = attend(q, k, v, self.layout.attention_mask(mask, video_queries=True))  # (B, T, H/sp, d)
        sent = out.unflatten(1, (world, local)).permute(1, 0, 2, 3, 4).contiguous()  # by token owner
        got = funcol.all_to_all_single(sent, None, None, group)  # by head share
        return got.permute(1, 2, 0, 3, 4).reshape(batch, local, heads, dim)


class GatheredKeysAttention:
    """Video→audio attention: replicated audio queries over the keys and values of all video tokens."""

    def __init__(self, layout: _Layout) -> None:
        self.layout = layout

    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 mask: torch.Tensor | None = None) -> torch.Tensor:
        kv = _gather_tokens(torch.stack([k, v]), 2, self.layout.group)
        return attend(q, kv[0], kv[1], self.layout.attention_mask(mask, video_queries=False))


class LocalTokensRun:
    """`prepare_run` of a sequence-parallel model: positions and the video attention weights padded, then the video
    RoPE tables (self and cross) and the first-frame mask cut to this rank's tokens; once per run. The attention
    bias stays over all (padded) tokens: after the all-to-all each rank attends all tokens with some heads."""

    def __init__(self, prepare_run, layout: _Layout) -> None:
        self.prepare_run, self.layout = prepare_run, layout

    def __call__(self, video_positions: torch.Tensor | None, *args, **kwargs) -> RunConstants:
        if video_positions is None:  # an audio-only run has no video tokens to split
            raise ValueError("text to audio runs on one GPU; load the model without sequence parallelism")
        layout = self.layout
        layout.set_tokens(video_positions.shape[2], video_positions.device)
        if kwargs.get("video_attention") is not None:
            kwargs["video_attention"] = layout.pad_weights(kwargs["video_attention"])
        run = self.prepare_run(layout.pad(video_positions, 2), *args, **kwargs)
        keyframes = None if run.video_keyframes is None else run.video_keyframes[:, layout.local]
        return run._replace(video_rope=self._local(run.video_rope), video_cross_rope=self._local(run.video_cross_rope),
                            video_keyframes=keyframes)

    def _local(self, rope: Rope | None) -> Rope | None:
        if rope is None:  # a video-only run (HDR, DFR's temporal rounds) has no cross-modal tables
            return None
        local = self.layout.local  # tokens are dim 1 of every table
        return Rope(rope.cos[:, local], rope.sin[:, local], None if rope.freqs is None else rope.freqs[:, local])


class LocalTokensForward:
    """The forward of a sequence-parallel model: this rank's video tokens in, all video tokens out (one gather)."""

    def __init__(self, forward, layout: _Layout) -> None:
        self.forward, self.layout = forward, layout

    def __call__(self, video: StreamInput, audio: StreamInput, run: RunConstants,
                 perturbations: BatchPerturbations | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        layout = self.layout
        timesteps = video.timesteps
        if timesteps.shape[1] == layout.tokens:  # per-token noise levels: the local ones
            timesteps = layout.pad(timesteps, 1)[:, layout.local]
        local = StreamInput(layout.pad(video.latent, 1)[:, layout.local], video.sigma, timesteps)
        video_out, audio_out = self.forward(local, audio, run, perturbations)
        gathered = _gather_tokens(video_out, 1, layout.group)
        return gathered[:, : layout.tokens], audio_out


class _Single(NamedTuple):
    """What a model ran with before its first sequence-parallel pass: the attention functions of each block (video
    self, video→audio) and its own `prepare_run` / `forward` (None: the class's method)."""

    attends: list[tuple[object, object]]
    prepare_run: object
    forward: object


def sequence_parallel(model: LTX2Transformer, group: dist.ProcessGroup | None = None) -> LTX2Transformer:
    """Makes `model` Ulysses-parallel over the ranks of `group` (default: all), in place; returns it. Called again
    with another group it moves to that group (no weight moves: every sp rank holds the whole blocks);
    `single_sequence` undoes it."""
    group = group or dist.group.WORLD
    single = model.__dict__.setdefault("_single_sequence", _Single(
        [(block.attn1.attend, block.video_to_audio_attn.attend) for block in model.transformer_blocks],
        model.__dict__.get("prepare_run"), model.__dict__.get("forward")))
    layout = _Layout(dist.get_rank(group), dist.get_world_size(group), group)
    for block in model.transformer_blocks:
        block.attn1.attend = UlyssesAttention(layout)
        block.video_to_audio_attn.attend = GatheredKeysAttention(layout)
    model.prepare_run = LocalTokensRun(single.prepare_run or type(model).prepare_run.__get__(model), layout)
    model.forward = LocalTokensForward(single.forward or type(model).forward.__get__(model), layout)
    model.__dict__["_sequence_group"] = group
    return model


def sequence_group(model: LTX2Transformer) -> dist.ProcessGroup | None:
    """The group `model`'s video tokens are split over (None: not split)."""
    return model.__dict__.get("_sequence_group")


def single_sequence(model: LTX2Transformer) -> LTX2Transformer:
    """Undoes `sequence_parallel` (every video token on this rank again); a model without it is returned as it is."""
    single = model.__dict__.pop("_single_sequence", None)
    if single is None:
        return model
    for block, (self_attend, v2a_attend) in zip(model.transformer_blocks, single.attends):
        block.attn1.attend, block.video_to_audio_attn.attend = self_attend, v2a_attend
    for name in ("prepare_run", "forward"):
        if getattr(single, name) is None:
            model.__dict__.pop(name, None)
        else:
            setattr(model, name, getattr(single, name))
    model.__dict__.pop("_sequence_group", None)
    return model
