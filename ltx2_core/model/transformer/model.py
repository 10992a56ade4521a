"""The LTX-2 audio+video DiT (spec §1) with the checkpoint's parameter names.

Usage: `run = model.prepare_run(positions…, contexts…)` once, then `model(video, audio, run, perturbations)` every
step; it returns velocities, `to_x0` turns them into denoised latents. Audio only (text to audio): video positions
and context None in `prepare_run` and `video` None in every forward; the blocks then run the audio stream alone (no
video tokens, no audio<->video cross-attention), as the reference's forward with `video=None`. Video only (the HDR
IC-LoRA): audio positions and context None and `audio` None, the mirror image.
"""

from __future__ import annotations

import torch
from torch import nn

from ltx2_core.errors import Interrupted
from ltx2_core.model.transformer.config import StreamConfig, TransformerConfig
from ltx2_core.model.transformer.adaln import AdaLayerNormSingle
from ltx2_core.model.transformer.attention import attention_bias
from ltx2_core.model.transformer.block import AVTransformerBlock, StreamArgs
from ltx2_core.model.transformer.kernels import layer_adaln, rope_fused
from ltx2_core.model.transformer.layers import CaptionProjection
from ltx2_core.model.transformer.perturbations import BatchPerturbations, block_skips
from ltx2_core.model.transformer.rope import rope_tables
from ltx2_core.types import Rope, RunConstants, StreamInput


# AdaLN modules of each stream: own timesteps, own sigma (2.3 text K/V), cross scale/shift (other stream's sigma; 2.5:
# own timesteps), cross gate (other stream's sigma)
_ADALN = {
    False: ("adaln_single", "prompt_adaln_single", "av_ca_video_scale_shift_adaln_single", "av_ca_a2v_gate_adaln_single"),
    True: ("audio_adaln_single", "audio_prompt_adaln_single", "av_ca_audio_scale_shift_adaln_single",
           "av_ca_v2a_gate_adaln_single"),
}


class LTX2Transformer(nn.Module):
    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        v, a = config.video, config.audio
        self.patchify_proj = nn.Linear(v.in_channels, v.width)
        self.audio_patchify_proj = nn.Linear(a.in_channels, a.width)
        if config.caption_channels is not None:
            self.caption_projection = CaptionProjection(config.caption_channels, v.width)
            self.audio_caption_projection = CaptionProjection(config.caption_channels, a.width)
        self.adaln_single = AdaLayerNormSingle(v.width, config.adaln_rows)
        self.audio_adaln_single = AdaLayerNormSingle(a.width, config.adaln_rows)
        if config.cross_attention_adaln and config.prompt_adaln:
            self.prompt_adaln_single = AdaLayerNormSingle(v.width, 2)
            self.audio_prompt_adaln_single = AdaLayerNormSingle(a.width, 2)
        self.av_ca_video_scale_shift_adaln_single = AdaLayerNormSingle(v.width, 4)
        self.av_ca_audio_scale_shift_adaln_single = AdaLayerNormSingle(a.width, 4)
        self.av_ca_a2v_gate_adaln_single = AdaLayerNormSingle(v.width, 1)
        self.av_ca_v2a_gate_adaln_single = AdaLayerNormSingle(a.width, 1)
        self.transformer_blocks = nn.ModuleList(AVTransformerBlock(i, config) for i in range(config.num_layers))
        self.scale_shift_table = nn.Parameter(torch.empty(2, v.width))
        self.audio_scale_shift_table = nn.Parameter(torch.empty(2, a.width))
        self.proj_out = nn.Linear(v.width, v.out_channels)
        self.audio_proj_out = nn.Linear(a.width, a.out_channels)
        if config.keyframe_embedding:
            self.keyframes_abs_pos_embedding = nn.Parameter(torch.empty(1, v.width))
        self.cache_text_kv = True  # prepare_run's default; a memory plan may turn it off

    @property
    def compute_dtype(self) -> torch.dtype:
        """The dtype the model computes in: that of a parameter no file quantises (any linear may be fp8, e.g.
        in ComfyUI's fp8_scaled files, so never a linear's weight)."""
        return self.scale_shift_table.dtype

    # ---------------------------------------------------------------- once per run
    def prepare_run(
        self,
        video_positions: torch.Tensor | None,
        audio_positions: torch.Tensor | None,
        video_context: torch.Tensor | None,
        audio_context: torch.Tensor | None,
        dtype: torch.dtype | None = None,
        cache_text_kv: bool | None = None,
        video_attention: torch.Tensor | None = None,
        video_marked: torch.Tensor | None = None,
    ) -> RunConstants:
        """Positions `(1 or B, axes, tokens, 2)` [start, end) bounds (video: seconds, px, px; audio: seconds) and
        text contexts `(B, text_tokens, ·)` from the connectors -> the per-run constants of every forward.
        The text keys and values of LTX-2.0 and 2.5 do not depend on the step (`TransformerConfig.static_text_kv`):
        with `cache_text_kv` they are computed here, once per run, instead of in every forward (2.3 modulates them
        by sigma, so never there); None: the model's `cache_text_kv`. `video_positions` None: an audio-only run
        (the video context is then ignored; every forward of the run takes `video` None). `video_attention`:
        (1, video tokens, video tokens) attention weights in [0, 1] between the video tokens (a condition's,
        `ConditionedStream.attention`), turned here into the self-attention's log bias (`attention_bias`); None:
        no bias, the attention runs without a mask. `video_marked`: (1, video tokens, 1) the tokens the keyframe
        embedding marks besides the first latent frame (generated keyframe slots, `ConditionedStream.marked`),
        joined here with the first frame's, once per run; ignored by a model without the embedding.
        `audio_positions` None: a video-only run (the audio context is then ignored; every forward of the run takes
        `audio` None; the HDR IC-LoRA's)."""
        cache_text_kv = self.cache_text_kv if cache_text_kv is None else cache_text_kv
        cfg = self.config
        dtype = dtype or self.compute_dtype
        if audio_positions is None:
            return self._video_only_run(video_positions, video_context, dtype, cache_text_kv, video_attention,
                                        video_marked)
        audio_context = audio_context.to(dtype)
        if hasattr(self, "caption_projection"):
            audio_context = self.audio_caption_projection(audio_context)
        if video_positions is None:
            return RunConstants(
                video_rope=None, audio_rope=self._rope(audio_positions, cfg.audio, cfg.audio.max_pos, cfg.audio.width,
                                                       dtype),
                video_cross_rope=None, audio_cross_rope=None, video_context=None, audio_context=audio_context,
                text_kv=self._text_kv(None, audio_context) if cache_text_kv else None,
            )
        video_context = video_context.to(dtype)
        if hasattr(self, "caption_projection"):
            video_context = self.caption_projection(video_context)
        return RunConstants(
            video_rope=self._rope(video_positions, cfg.video, cfg.video.max_pos, cfg.video.width, dtype),
            audio_rope=self._rope(audio_positions, cfg.audio, cfg.audio.max_pos, cfg.audio.width, dtype),
            video_cross_rope=self._rope(video_positions[:, :1], cfg.video, (cfg.cross_pe_max_pos,), cfg.cross_pe_dim,
                                        dtype),
            audio_cross_rope=self._rope(audio_positions[:, :1], cfg.audio, (cfg.cross_pe_max_pos,), cfg.cross_pe_dim,
                                        dtype),
            video_context=video_context,
            audio_context=audio_context,
            text_kv=self._text_kv(video_context, audio_context) if cache_text_kv else None,
            video_keyframes=keyframe_marks(video_positions, video_marked, dtype) if cfg.keyframe_embedding else None,
            video_attention=None if video_attention is None else attention_bias(video_attention, dtype),
        )

    def _video_only_run(self, video_positions: torch.Tensor, video_context: torch.Tensor, dtype: torch.dtype,
                        cache_text_kv: bool, video_attention: torch.Tensor | None,
                        video_marked: torch.Tensor | None = None) -> RunConstants:
        """The run constants without audio (no audio RoPE, context or cross-attention RoPE); the keyframe marks as
        with audio (first latent frame or `video_marked`: DFR's temporal rounds generate slots video only)."""
        cfg = self.config
        video_context = video_context.to(dtype)
        if hasattr(self, "caption_projection"):
            video_context = self.caption_projection(video_context)
        return RunConstants(
            video_rope=self._rope(video_positions, cfg.video, cfg.video.max_pos, cfg.video.width, dtype),
            audio_rope=None, video_cross_rope=None, audio_cross_rope=None, video_context=video_context,
            audio_context=None, text_kv=self._text_kv(video_context, None) if cache_text_kv else None,
            video_keyframes=keyframe_marks(video_positions, video_marked, dtype) if cfg.keyframe_embedding else None,
            video_attention=None if video_attention is None else attention_bias(video_attention, dtype),
        )

    def _text_kv(self, video_context: torch.Tensor | None, audio_context: torch.Tensor | None):
        if not self.config.static_text_kv:
            return None
        return tuple(block.text_keys_values(video_context, audio_context) for block in self.transformer_blocks)

    def _rope(self, positions: torch.Tensor, stream: StreamConfig, max_pos: tuple[float, ...], dim: int,
              dtype: torch.dtype) -> Rope:
        cfg = self.config
        return rope_tables(positions, dim=dim, heads=stream.heads, max_pos=max_pos, theta=cfg.rope_theta,
                           rope_type=cfg.rope_type, float64=cfg.rope_float64, dtype=dtype,
                           freqs=rope_fused(cfg.rope_type, positions.device, dtype))

    # ---------------------------------------------------------------- every step
    def forward(
        self,
        video: StreamInput | None,
        audio: StreamInput | None,
        run: RunConstants,
        perturbations: BatchPerturbations | None = None,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """-> velocities (B, video_tokens, out_channels), (B, audio_tokens, out_channels) in the latents' dtype;
        `video` None (an audio-only run): the video velocity is None; `audio` None (video only): the audio's.
        `run.should_stop()` true before a block: `Interrupted`."""
        ax = audio_args = vx = video_args = None
        if audio is not None:
            audio_args, audio_embedded = self._stream_args(audio, video, run.audio_context, run.audio_rope,
                                                           run.audio_cross_rope, audio_side=True)
            ax = self.audio_patchify_proj(audio.latent)
        if video is not None:
            video_args, video_embedded = self._stream_args(video, audio, run.video_context, run.video_rope,
                                                           run.video_cross_rope, audio_side=False)
            video_args = video_args._replace(attention=run.video_attention)
            vx = self.patchify_proj(video.latent)
            if run.video_keyframes is not None:  # fixed for the run: the same operations every step
                vx = vx + run.video_keyframes * self.keyframes_abs_pos_embedding.to(vx.dtype)
        for index, block in enumerate(self.transformer_blocks):
            if run.should_stop is not None and run.should_stop():  # a host flag: a cancel lands within one block
                raise Interrupted(f"stopped on request before transformer block {index}")
            text_kv = None if run.text_kv is None else run.text_kv[index]
            vx, ax = block(vx, ax, video_args, audio_args, block_skips(perturbations, index), text_kv)
        video_out = None if video is None else self._output(vx, video_embedded, self.scale_shift_table,
                                                            self.proj_out)
        if audio is None:
            return video_out, None
        return video_out, self._output(ax, audio_embedded, self.audio_scale_shift_table, self.audio_proj_out)

    def _stream_args(
        self, own: StreamInput, other: StreamInput | None, context: torch.Tensor, rope: Rope,
        cross_rope: Rope | None, *, audio_side: bool,
    ) -> tuple[StreamArgs, torch.Tensor]:
        """AdaLN inputs of one stream: its own timesteps, its own sigma (text K/V, 2.3), the other stream's sigma
        (audio<->video cross-attention: its scale/shift, from the stream's own timesteps in 2.5, and its gate);
        no other stream (audio only): no cross-attention inputs."""
        cfg = self.config
        adaln, prompt_adaln, cross_adaln, gate_adaln = (getattr(self, name, None) for name in _ADALN[audio_side])
        dtype = own.latent.dtype
        scale = cfg.timestep_scale_multiplier
        ada, embedded = adaln(own.timesteps * scale, dtype)
        prompt_ada = prompt_adaln(own.sigma[:, None] * scale, dtype)[0] if prompt_adaln is not None else None
        if other is None:
            return StreamArgs(ada, prompt_ada, None, None, context, rope, None), embedded
        cross_t = other.sigma[:, None] * scale
        cross_ada, _ = cross_adaln(own.timesteps * scale if cfg.own_timestep_cross_modulation else cross_t, dtype)
        cross_gate, _ = gate_adaln(cross_t * (cfg.av_ca_timestep_scale_multiplier / scale), dtype)
        return StreamArgs(ada, prompt_ada, cross_ada, cross_gate, context, rope, cross_rope), embedded

    def _output(self, x: torch.Tensor, embedded: torch.Tensor, table: torch.Tensor, proj: nn.Linear) -> torch.Tensor:
        shift, scale = (table.to(embedded.dtype) + embedded.unsqueeze(2)).unbind(dim=2)  # (B, n, D) each
        return proj(layer_adaln(x, scale, shift, self.config.norm_eps))


def first_frame_mask(video_positions: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(1 or B, tokens, 1): 1 on the tokens of the first latent frame (a single pixel frame of the causal VAE, the
    tokens the keyframe embedding marks), 0 elsewhere, from positions (1 or B, 3, tokens, 2). Those tokens lead the
    sequence with the time bounds of token 0; guiding tokens appended after the grid are never in that leading run.
    Device work only (no host read)."""
    time = video_positions[:, 0]
    same = (time == time[:, :1]).all(dim=-1)
    return same.to(torch.int32).cumprod(dim=1).unsqueeze(-1).to(dtype)


def keyframe_marks(video_positions: torch.Tensor, marked: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor:
    """(1 or B, tokens, 1): the tokens the keyframe embedding marks, the first latent frame's (`first_frame_mask`)
    or `marked` ones (1, tokens, 1) (generated keyframe slots), as the reference's per-token `keyframes_mask`.
    Device work only, once per run."""
    first = first_frame_mask(video_positions, dtype)
    return first if marked is None else torch.maximum(first, marked.to(first))


def to_x0(latent: torch.Tensor, velocity: torch.Tensor, timesteps: torch.Tensor) -> torch.Tensor:
    """Denoised latent x0 = x − v·t per token (fp32 math), timesteps (B, tokens) or (B, 1)."""
    x0 = latent.float() - velocity.float() * timesteps.float().unsqueeze(-1)
    return x0.to(latent.dtype)
