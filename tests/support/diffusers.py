"""diffusers' `LTX2VideoTransformer3DModel` holding our weights: the official names mapped to diffusers' ones (as
diffusers' `scripts/convert_ltx2_to_diffusers.py` renames them), for side-by-side runs and layout tests.

diffusers is imported only by the functions that build or run its model, so the name map needs no install.
"""

from __future__ import annotations

import torch

from ltx2_core.model.transformer.config import ModelVersion, TransformerConfig

# official substring -> diffusers' (applied in this order: the audio names contain the video ones)
DIFFUSERS_RENAMES = (
    ("patchify_proj", "proj_in"),
    ("av_ca_video_scale_shift_adaln_single", "av_cross_attn_video_scale_shift"),
    ("av_ca_a2v_gate_adaln_single", "av_cross_attn_video_a2v_gate"),
    ("av_ca_audio_scale_shift_adaln_single", "av_cross_attn_audio_scale_shift"),
    ("av_ca_v2a_gate_adaln_single", "av_cross_attn_audio_v2a_gate"),
    ("scale_shift_table_a2v_ca_video", "video_a2v_cross_attn_scale_shift_table"),
    ("scale_shift_table_a2v_ca_audio", "audio_a2v_cross_attn_scale_shift_table"),
    ("prompt_adaln_single", "prompt_adaln"),
    ("q_norm", "norm_q"),
    ("k_norm", "norm_k"),
)
_TOP_RENAMES = (("adaln_single.", "time_embed."), ("audio_adaln_single.", "audio_time_embed."))


def diffusers_name(name: str) -> str:
    """diffusers' name of one of the DiT's official parameter names (prefix already stripped)."""
    for official, diffusers in DIFFUSERS_RENAMES:
        name = name.replace(official, diffusers)
    for official, diffusers in _TOP_RENAMES:
        if name.startswith(official):
            name = diffusers + name[len(official):]
    return name


def diffusers_transformer(config: TransformerConfig, state: dict[str, torch.Tensor]) -> torch.nn.Module:
    """LTX2VideoTransformer3DModel of `config` built on meta and assigned `state` (our names; tensors shared, not
    copied), in eval mode."""
    from diffusers import LTX2VideoTransformer3DModel

    is_23 = config.version is ModelVersion.V2_3
    with torch.device("meta"):
        model = LTX2VideoTransformer3DModel(
            num_attention_heads=config.video.heads, attention_head_dim=config.video.head_dim,
            cross_attention_dim=config.video.context_dim, audio_num_attention_heads=config.audio.heads,
            audio_attention_head_dim=config.audio.head_dim, audio_cross_attention_dim=config.audio.context_dim,
            num_layers=config.num_layers, caption_channels=config.caption_channels or config.video.context_dim,
            gated_attn=config.gated_attention, audio_gated_attn=config.gated_attention,
            cross_attn_mod=config.cross_attention_adaln, audio_cross_attn_mod=config.cross_attention_adaln,
            rope_type=config.rope_type, rope_double_precision=config.rope_float64,
            use_prompt_embeddings=config.caption_channels is not None, perturbed_attn=is_23)
    model.load_state_dict({diffusers_name(k): v for k, v in state.items()}, strict=True, assign=True)
    return model.eval()


def diffusers_forward(model: torch.nn.Module, config: TransformerConfig, video: torch.Tensor, audio: torch.Tensor,
                      context: tuple[torch.Tensor, torch.Tensor], sigma: float, video_positions: torch.Tensor,
                      audio_positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One pass at noise level `sigma` for every token, the inputs in our layouts: latents (B, tokens, 128), text
    contexts before the caption projection, positions (1, axes, tokens, 2)."""
    batch, timestep = video.shape[0], sigma * 1000.0  # diffusers takes timesteps already scaled
    times = video.new_full((batch,), timestep)
    return model(
        hidden_states=video, audio_hidden_states=audio, encoder_hidden_states=context[0],
        audio_encoder_hidden_states=context[1], timestep=times[:, None].expand(-1, video.shape[1]),
        audio_timestep=times[:, None].expand(-1, audio.shape[1]), sigma=times, audio_sigma=times,
        video_coords=video_positions.expand(batch, -1, -1, -1), audio_coords=audio_positions.expand(batch, -1, -1, -1),
        use_cross_timestep=config.version is ModelVersion.V2_3, return_dict=False)
