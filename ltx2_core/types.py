"""Values passed between the pieces of ltx2_core: plain NamedTuples / frozen dataclasses of tensors."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch

Blocks = tuple[int, ...] | Literal["all"]


class Rope(NamedTuple):
    """cos/sin tables of one rotary embedding.

    split:       (B or 1, tokens, heads, head_dim // 2) each
    interleaved: (B or 1, tokens, heads, head_dim) each (every angle twice)
    freqs:       (B or 1, tokens, heads, head_dim // 2, 2, 2) the same angles as comfy-kitchen's rotation matrices
                 [[cos, −sin], [sin, cos]], built only for a run whose RoPE goes through its fused kernels
                 (`model/transformer/kernels.py`); None: ours rotates with cos/sin
    """

    cos: torch.Tensor
    sin: torch.Tensor
    freqs: torch.Tensor | None = None


class StreamInput(NamedTuple):
    """What changes every denoising step for one modality.

    latent:    (B, tokens, in_channels) patchified latent tokens
    sigma:     (B,) current noise level of the sample (drives the other stream's cross-attention AdaLN and, in 2.3,
               the text cross-attention modulation)
    timesteps: (B, tokens) per-token noise level (sigma·denoise_mask; conditioned tokens 0) or (B, 1) when uniform
    """

    latent: torch.Tensor
    sigma: torch.Tensor
    timesteps: torch.Tensor


class RunConstants(NamedTuple):
    """Everything a forward needs that stays fixed for a whole run: build once, pass every step.

    video_context / audio_context: (B, text_tokens, width) text context after the in-DiT caption projection.
    text_kv: see below.
    video_cross_rope / audio_cross_rope: the time-only RoPE of the audio<->video cross-attention, per side
    (a2v queries use the video side and keys the audio side; v2a the other way round).
    An audio-only run (text to audio) has no video: video_rope, both cross RoPEs, video_context and
    video_keyframes are None, and so are the video keys and values of `text_kv`. A video-only run (the HDR IC-LoRA)
    has no audio: audio_rope, both cross RoPEs, audio_context and the audio keys and values of `text_kv` are None.
    should_stop: read on the host before every transformer block (a Python call, never a tensor read): True stops
    the forward there with `errors.Interrupted`; None: never read (a captured CUDA graph runs no Python inside).
    """

    video_rope: Rope | None
    audio_rope: Rope | None
    video_cross_rope: Rope | None
    audio_cross_rope: Rope | None
    video_context: torch.Tensor | None
    audio_context: torch.Tensor | None
    # per block (video keys, video values, audio keys, audio values) of the text cross-attention, when the text
    # K/V are the same every step (LTX-2.0 and 2.5: computed once per run); None: computed in every forward (2.3)
    text_kv: tuple[tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor, torch.Tensor], ...] | None = None
    # (1 or B, video tokens, 1) 1 on the first latent frame's tokens, for a model with the keyframe embedding
    video_keyframes: torch.Tensor | None = None
    # (1, 1, video tokens, video tokens) additive bias of the video self-attention in the compute dtype (log of the
    # conditions' attention weights, shared by every pass); None: every token attends to every token
    video_attention: torch.Tensor | None = None
    should_stop: Callable[[], bool] | None = None

    def batch(self, part: slice) -> RunConstants:
        """The constants of the samples `part` of the batch (the RoPE tables are shared by all)."""
        kv = None if self.text_kv is None else tuple(tuple(_part(t, part) for t in block) for block in self.text_kv)
        return self._replace(video_context=_part(self.video_context, part),
                             audio_context=_part(self.audio_context, part), text_kv=kv)


def _part(tensor: torch.Tensor | None, part: slice) -> torch.Tensor | None:
    return None if tensor is None else tensor[part]


@dataclass(frozen=True)
class PassPerturbation:
    """What one sample of the batch (one guidance pass) removes from the transformer.

    skip_video_self_attn / skip_audio_self_attn: blocks whose self-attention is replaced by the V passthrough (STG).
    skip_a2v / skip_v2a: blocks without the audio->video / video->audio cross-attention ("all" = modality isolation).
    """

    skip_video_self_attn: Blocks = ()
    skip_audio_self_attn: Blocks = ()
    skip_a2v: Blocks = ()
    skip_v2a: Blocks = ()

    @classmethod
    def stg(cls, video_blocks: Blocks = (), audio_blocks: Blocks = ()) -> PassPerturbation:
        """Spatio-temporal guidance pass: self-attention skipped in the given video and audio blocks."""
        return cls(skip_video_self_attn=_blocks(video_blocks), skip_audio_self_attn=_blocks(audio_blocks))

    @classmethod
    def isolated(cls) -> PassPerturbation:
        """Modality isolation: no audio<->video cross-attention anywhere."""
        return cls(skip_a2v="all", skip_v2a="all")


def _blocks(blocks: Blocks) -> Blocks:
    return "all" if blocks == "all" else tuple(int(b) for b in blocks)


class TextEmbeddings(NamedTuple):
    """A batch of encoded prompts, as the DiT's text contexts (all tokens valid: padding became registers).

    video: (B, tokens, video context width)   audio: (B, tokens, audio context width)
    """

    video: torch.Tensor
    audio: torch.Tensor

    def select(self, index: int | slice) -> TextEmbeddings:
        """Prompts `index` of the batch, keeping the batch dim."""
        index = index if isinstance(index, slice) else slice(index, index + 1)
        return TextEmbeddings(self.video[index], self.audio[index])

    def to(self, device: torch.device | str) -> TextEmbeddings:
        return TextEmbeddings(self.video.to(device), self.audio.to(device))
