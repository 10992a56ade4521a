"""One audio+video transformer block (spec §1.5). Parameter names are the checkpoint's.

The forward is the list of steps of the reference, in the same order: per stream self-attention and text
cross-attention, then the audio<->video cross-attention from the same pre-update norms, then the feed-forwards.
Every guidance variant (STG, modality isolation, mixed batches of them) goes through this one path. Without a video
stream (`vx` None: text to audio) the block is the audio stream's steps alone.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from ltx2_core.model.transformer.config import StreamConfig, TransformerConfig
from ltx2_core.model.transformer.adaln import modulation_rows
from ltx2_core.model.transformer.attention import Attention
from ltx2_core.model.transformer.kernels import fused, rms_adaln
from ltx2_core.model.transformer.layers import FeedForward, rms
from ltx2_core.model.transformer.perturbations import NO_PERTURBATION, BlockSkips, AttentionSkip
from ltx2_core.types import Rope

# rows of scale_shift_table
SELF_ATTN, FEED_FORWARD, TEXT_CROSS_ATTN = 0, 3, 6
# rows of scale_shift_table_a2v_ca_* (note: scale before shift here)
A2V, V2A, CROSS_GATE = 0, 2, 4


class StreamArgs(NamedTuple):
    """Per-step inputs of one stream shared by every block.

    ada:        (B, 1 or tokens, rows·D) AdaLN modulation from the stream's own timesteps
    prompt_ada: (B, 1, 2·D) text K/V modulation from the stream's sigma (2.3's prompt AdaLN), else None
    cross_ada:  (B, 1 or tokens, 4·D) a2v/v2a scale/shift from the OTHER stream's sigma (2.0, 2.3) or from the
                stream's own timesteps (2.5); None without another stream (audio only)
    cross_gate: (B, 1, D) gate of the cross-attention writing into this stream, from the other stream's sigma
                (None without another stream)
    context:    (B, text_tokens, D) text context
    rope / cross_rope: self-attention RoPE and this side's audio<->video cross-attention RoPE (None: audio only)
    attention:  (1, 1, tokens, tokens) additive bias of the self-attention (`RunConstants.video_attention`); None:
                all tokens attend to all
    """

    ada: torch.Tensor
    prompt_ada: torch.Tensor | None
    cross_ada: torch.Tensor | None
    cross_gate: torch.Tensor | None
    context: torch.Tensor
    rope: Rope
    cross_rope: Rope | None
    attention: torch.Tensor | None = None


class StreamModules(NamedTuple):
    self_attn: Attention
    text_attn: Attention
    ff: FeedForward
    table: nn.Parameter
    prompt_table: nn.Parameter | None
    self_attn_skip: int  # index into BlockSkips


class AVTransformerBlock(nn.Module):
    def __init__(self, idx: int, config: TransformerConfig) -> None:
        super().__init__()
        self.idx = idx
        self.eps = config.norm_eps
        self.cross_attention_adaln = config.cross_attention_adaln
        v, a = config.video, config.audio

        def attention(query_dim: int, context_dim: int, stream: StreamConfig) -> Attention:
            return Attention(query_dim, context_dim, stream.heads, stream.head_dim, gated=config.gated_attention,
                             rope_type=config.rope_type, eps=config.norm_eps)

        self.attn1 = attention(v.width, v.width, v)
        self.attn2 = attention(v.width, v.context_dim, v)
        self.ff = FeedForward(v.width, bias=config.ff_bias)
        self.scale_shift_table = nn.Parameter(torch.empty(config.adaln_rows, v.width))
        self.audio_attn1 = attention(a.width, a.width, a)
        self.audio_attn2 = attention(a.width, a.context_dim, a)
        self.audio_ff = FeedForward(a.width, bias=config.audio_ff_bias)
        self.audio_scale_shift_table = nn.Parameter(torch.empty(config.adaln_rows, a.width))
        # both cross-modal attentions use the audio geometry (heads × audio head_dim)
        self.audio_to_video_attn = attention(v.width, a.width, a)
        self.video_to_audio_attn = attention(a.width, v.width, a)
        self.scale_shift_table_a2v_ca_video = nn.Parameter(torch.empty(5, v.width))
        self.scale_shift_table_a2v_ca_audio = nn.Parameter(torch.empty(5, a.width))
        if config.cross_attention_adaln:  # with or without the prompt AdaLN (2.3 / 2.5)
            self.prompt_scale_shift_table = nn.Parameter(torch.empty(2, v.width))
            self.audio_prompt_scale_shift_table = nn.Parameter(torch.empty(2, a.width))

    def forward(
        self,
        vx: torch.Tensor | None,
        ax: torch.Tensor | None,
        video: StreamArgs | None,
        audio: StreamArgs | None,
        skips: BlockSkips = NO_PERTURBATION,
        text_kv: tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """vx (B, video_tokens, Dv), ax (B, audio_tokens, Da) -> updated (vx, ax); `skips`: this block's share of
        the batch's perturbations (`block_skips(perturbations, idx)`); `text_kv`: this block's text keys and
        values computed once per run (`text_keys_values`; LTX-2.0 and 2.5), or None. `vx` and `video` None: the
        audio stream alone (self-attention, text cross-attention, feed-forward), vx stays None; `ax` and `audio`
        None: the video stream alone in the same way (video only)."""
        video_modules, audio_modules = self._streams()
        video_kv, audio_kv = (None, None) if text_kv is None else (text_kv[:2], text_kv[2:])
        if vx is None:
            ax = ax + self._self_attention(audio_modules, ax, audio, skips)
            ax = ax + self._text_cross_attention(audio_modules, ax, audio, audio_kv)
            return None, ax + self._feed_forward(audio_modules, ax, audio)
        if ax is None:  # the video stream alone (HDR IC-LoRA), as the reference's block without audio
            vx = vx + self._self_attention(video_modules, vx, video, skips)
            vx = vx + self._text_cross_attention(video_modules, vx, video, video_kv)
            return vx + self._feed_forward(video_modules, vx, video), None
        vx = vx + self._self_attention(video_modules, vx, video, skips)
        vx = vx + self._text_cross_attention(video_modules, vx, video, video_kv)
        ax = ax + self._self_attention(audio_modules, ax, audio, skips)
        ax = ax + self._text_cross_attention(audio_modules, ax, audio, audio_kv)
        vx, ax = self._audio_video_cross_attention(vx, ax, video, audio, skips)
        vx = vx + self._feed_forward(video_modules, vx, video)
        ax = ax + self._feed_forward(audio_modules, ax, audio)
        return vx, ax

    def _streams(self) -> tuple[StreamModules, StreamModules]:
        return (
            StreamModules(self.attn1, self.attn2, self.ff, self.scale_shift_table,
                          getattr(self, "prompt_scale_shift_table", None), 0),
            StreamModules(self.audio_attn1, self.audio_attn2, self.audio_ff, self.audio_scale_shift_table,
                          getattr(self, "audio_prompt_scale_shift_table", None), 1),
        )

    def _self_attention(
        self, m: StreamModules, x: torch.Tensor, args: StreamArgs, skips: BlockSkips
    ) -> torch.Tensor:
        shift, scale, gate = modulation_rows(m.table, args.ada, SELF_ATTN, 3)
        skip = skips[m.self_attn_skip]
        h = rms_adaln(x, scale, shift, self.eps)
        return m.self_attn(h, rope=args.rope, keep=skip.keep, passthrough=skip.skip_all,
                           mask=args.attention) * gate

    def text_keys_values(self, video_context: torch.Tensor | None, audio_context: torch.Tensor | None
                         ) -> tuple[torch.Tensor | None, ...]:
        """(video keys, video values, audio keys, audio values) of the text cross-attentions, (B, S, inner) each,
        for text K/V that do not depend on the step (`TransformerConfig.static_text_kv`): computed once per run.
        No video context (audio only): the video's are None; no audio context (video only): the audio's."""
        kv = []
        for m, context in zip(self._streams(), (video_context, audio_context)):
            kv += [None, None] if context is None else m.text_attn.keys_values(self._prompt_context(m, context, None))
        return tuple(kv)

    def _prompt_context(self, m: StreamModules, context: torch.Tensor, prompt_ada: torch.Tensor | None
                        ) -> torch.Tensor:
        """The text context the keys and values are made of: modulated by the block's prompt table (2.3 and 2.5),
        plus the sigma-dependent `prompt_ada` where there is one (2.3)."""
        if not self.cross_attention_adaln:
            return context
        if prompt_ada is None:
            shift_kv, scale_kv = m.prompt_table.to(context.dtype).unbind(0)
        else:
            shift_kv, scale_kv = modulation_rows(m.prompt_table, prompt_ada, 0, 2)
        return context * (1 + scale_kv) + shift_kv

    def _text_cross_attention(self, m: StreamModules, x: torch.Tensor, args: StreamArgs,
                              kv: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        if not self.cross_attention_adaln:
            return m.text_attn(rms(x, self.eps), args.context, kv=kv)
        shift_q, scale_q, gate = modulation_rows(m.table, args.ada, TEXT_CROSS_ATTN, 3)
        q_in = rms_adaln(x, scale_q, shift_q, self.eps)
        context = args.context if kv is not None else self._prompt_context(m, args.context, args.prompt_ada)
        return m.text_attn(q_in, context, kv=kv) * gate

    def _audio_video_cross_attention(
        self,
        vx: torch.Tensor,
        ax: torch.Tensor,
        video: StreamArgs,
        audio: StreamArgs,
        skips: BlockSkips,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # both directions read the same pre-update norms: computed once here, or inside each fused modulation
        eps = self.eps if fused("rms_adaln", vx.device, vx.dtype) else None
        nv, na = (vx, ax) if eps is not None else (rms(vx, self.eps), rms(ax, self.eps))
        a2v, v2a = skips.a2v, skips.v2a
        vx_new, ax_new = vx, ax
        if not a2v.skip_all:
            vx_new = vx + self._cross(self.audio_to_video_attn, A2V, nv, video, self.scale_shift_table_a2v_ca_video,
                                      na, audio, self.scale_shift_table_a2v_ca_audio, a2v, eps)
        if not v2a.skip_all:
            ax_new = ax + self._cross(self.video_to_audio_attn, V2A, na, audio, self.scale_shift_table_a2v_ca_audio,
                                      nv, video, self.scale_shift_table_a2v_ca_video, v2a, eps)
        return vx_new, ax_new

    @staticmethod
    def _cross(
        attn: Attention,
        rows: int,
        q_norm: torch.Tensor,
        q_args: StreamArgs,
        q_table: nn.Parameter,
        kv_norm: torch.Tensor,
        kv_args: StreamArgs,
        kv_table: nn.Parameter,
        skip: AttentionSkip,
        eps: float | None,
    ) -> torch.Tensor:
        """One direction of the audio<->video cross-attention, written into the query stream; `q_norm` and
        `kv_norm` are the streams RMS-normalised (eps None), or as they are, normalised in `rms_adaln` with `eps`."""
        q_scale, q_shift = modulation_rows(q_table[:CROSS_GATE], q_args.cross_ada, rows, 2)
        kv_scale, kv_shift = modulation_rows(kv_table[:CROSS_GATE], kv_args.cross_ada, rows, 2)
        (gate,) = modulation_rows(q_table[CROSS_GATE:], q_args.cross_gate, 0, 1)
        out = attn(_modulated(q_norm, q_scale, q_shift, eps), _modulated(kv_norm, kv_scale, kv_shift, eps),
                   rope=q_args.cross_rope, k_rope=kv_args.cross_rope) * gate
        return out if skip.keep is None else out * skip.keep

    def _feed_forward(self, m: StreamModules, x: torch.Tensor, args: StreamArgs) -> torch.Tensor:
        shift, scale, gate = modulation_rows(m.table, args.ada, FEED_FORWARD, 3)
        return m.ff(rms_adaln(x, scale, shift, self.eps)) * gate


def _modulated(x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor, eps: float | None) -> torch.Tensor:
    """x·(1 + scale) + shift of an RMS-normalised x (eps None), or of RMSNorm(x) in one `rms_adaln`."""
    return x * (1 + scale) + shift if eps is None else rms_adaln(x, scale, shift, eps)
