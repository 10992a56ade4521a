"""What one transformer forward costs each rank of a cfg × sp × tp layout: FLOPs per block and collective bytes.

The sizes come from a `TransformerConfig` (the released 2.3 / 2.5: video 32 × 128, audio 32 × 64, 48 blocks); the
collectives are the ones the passes in this package issue (counted under gloo by tests/distributed):

* sp (Ulysses, `sequence_parallel.py`): per block one all-to-all of the stacked q, k, v of video self-attention, one
  of its output, one all-gather of the v2a keys and values of all video tokens; per forward one all-gather of the
  video output. The audio stream is replicated.
* tp (Megatron, `tensor_parallel.py`): per block 20 all-reduces: per attention (6: video and audio self, text
  cross, a2v, v2a) the q-norm and k-norm sums of squares (fp32, one value per token) and the row-parallel output;
  per feed-forward (2) the output (4 outputs of video tokens, 4 of audio tokens). Where the text keys are the
  same every step (2.0, 2.5) the run computes them once: the two text k-norms leave the forward (18 all-reduces).
* cfg (`cfg_parallel.py`): one all-gather of every pass's prediction per step.

"Sent per rank" counts what leaves one rank: a ring all-reduce 2(n−1)/n of its payload, an all-to-all (n−1)/n of
the rank's part, an all-gather (n−1)/n of the gathered whole.
"""

from __future__ import annotations

from dataclasses import dataclass

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.parallel.config import ParallelConfig

BF16 = 2
FP32 = 4
LATENT_CHANNELS = 128
TEXT_TOKENS = 1024
TP_ALL_REDUCES = 20  # per block: 6 attentions × (q-norm, k-norm, output) + 2 feed-forwards
SP_COLLECTIVES = 3  # per block: 2 all-to-all + 1 all-gather


@dataclass(frozen=True)
class Tokens:
    video: int
    audio: int
    text: int = TEXT_TOKENS


@dataclass(frozen=True)
class Traffic:
    """One rank's collective traffic for one forward of one pass: bytes sent and collective steps, per axis."""

    sp_bytes: float = 0.0
    sp_steps: int = 0  # latency-bearing exchanges (each n−1 link steps)
    tp_bytes: float = 0.0
    tp_steps: int = 0

    def __add__(self, other: Traffic) -> Traffic:
        return Traffic(self.sp_bytes + other.sp_bytes, self.sp_steps + other.sp_steps,
                       self.tp_bytes + other.tp_bytes, self.tp_steps + other.tp_steps)


def block_flops(config: TransformerConfig, tokens: Tokens, layout: ParallelConfig = ParallelConfig()) -> float:
    """One rank's FLOPs for one block of one pass (shared/docs/performance.md's formula): sp divides the video
    tokens' work, tp every linear and every head; the audio stream is replicated over sp."""
    d, da = config.video.width, config.audio.width
    tv, ta, c = tokens.video / layout.sp, tokens.audio, tokens.text
    video_linear = 2 * tv * (14 * d * d + 4 * d * da)
    audio_linear = 2 * ta * 18 * da * da
    attention = 4 * (tv * tokens.video * d + tv * c * d + 2 * tv * ta * da + ta * ta * da + ta * c * da)
    text_kv = 0.0 if config.static_text_kv else 4 * c * (d * d + da * da)  # 2.3: modulated per step
    return (video_linear + audio_linear + attention + text_kv) / layout.tp


def forward_traffic(config: TransformerConfig, tokens: Tokens, layout: ParallelConfig,
                    element: int = BF16) -> Traffic:
    """Bytes and collective steps one rank sends in one forward of one pass (activations of `element` bytes)."""
    per_block = _sp_block(config, tokens, layout, element) + _tp_block(config, tokens, layout, element)
    blocks = config.num_layers
    total = Traffic(per_block.sp_bytes * blocks, per_block.sp_steps * blocks,
                    per_block.tp_bytes * blocks, per_block.tp_steps * blocks)
    if layout.sp > 1:  # the video output gathered once per forward
        out = config.video.out_channels
        total += Traffic(sp_bytes=tokens.video / layout.sp * out * element * (layout.sp - 1), sp_steps=1)
    return total


def _sp_block(config: TransformerConfig, tokens: Tokens, layout: ParallelConfig, element: int) -> Traffic:
    s, t = layout.sp, layout.tp
    if s == 1:
        return Traffic()
    local = tokens.video / s
    share = (s - 1) / s
    qkv_and_out = 4 * local * config.video.width / t * element * share  # all-to-all in (q, k, v) and out
    v2a = 2 * tokens.video * config.audio.width / t * element * share  # all-gather of all video tokens' k, v
    return Traffic(sp_bytes=qkv_and_out + v2a, sp_steps=SP_COLLECTIVES)


def _tp_block(config: TransformerConfig, tokens: Tokens, layout: ParallelConfig, element: int) -> Traffic:
    t = layout.tp
    if t == 1:
        return Traffic()
    tv, ta = tokens.video / layout.sp, tokens.audio
    text_keys = 0 if config.static_text_kv else 2  # the text k-norms, in the forward only where K/V change per step
    outputs = 4 * (tv * config.video.width + ta * config.audio.width) * element
    # q-norm and k-norm sums: video self (tv, tv), video text (tv; text keys), audio self (ta, ta), audio text (ta;
    # text keys), a2v (tv queries, audio keys), v2a (audio queries, all video keys)
    norms = (4 * tv + tokens.video + 5 * ta + text_keys * tokens.text) * FP32
    return Traffic(tp_bytes=(outputs + norms) * 2 * (t - 1) / t, tp_steps=(TP_ALL_REDUCES - 2 + text_keys) * 2)


def cfg_gather_bytes(tokens: Tokens, passes: int, layout: ParallelConfig) -> float:
    """Bytes one rank sends per step when the cfg group gathers every pass's prediction (bf16)."""
    if layout.cfg == 1:
        return 0.0
    whole = passes * (tokens.video + tokens.audio) * LATENT_CHANNELS * BF16
    return whole * (layout.cfg - 1) / layout.cfg


def weight_bytes(config: TransformerConfig, tp: int = 1) -> float:
    """bf16 bytes of the blocks' linears one rank holds (the rest, embeddings and tables, is small and replicated)."""
    d, da = config.video.width, config.audio.width
    per_block = 14 * d * d + 4 * d * da + 18 * da * da + 2 * (d * d + da * da)  # + text K/V projections
    return per_block * config.num_layers * BF16 / tp
