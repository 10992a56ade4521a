"""Tiny metadata sections of the non-DiT components (the released layout at toy sizes)."""

from ltx2_core.demo import DEMO_AUDIO_VAE, DEMO_VAES, DEMO_VOCODERS
from ltx2_core.model.video_vae.released import RELEASED_VAE_SECTIONS

_RES = {"num_layers": 1}
_UP = {"residual": True, "multiplier": 2}

# the released block structures (spec §3) at toy widths: 2.0 = residual ×2×2×2 stages and reflect padding,
# 2.3 = time and space upsampled separately, non-residual, zeros padding
TINY_VAE = {
    "dims": 3, "in_channels": 3, "out_channels": 3, "latent_channels": 16, "patch_size": 4,
    "norm_layer": "pixel_norm", "latent_log_var": "uniform", "causal_decoder": False, "decoder_base_channels": 8,
    "timestep_conditioning": False,
    "encoder_blocks": [["res_x", _RES], ["compress_space_res", {"multiplier": 2}], ["res_x", _RES],
                       ["compress_time_res", {"multiplier": 2}], ["res_x", _RES],
                       ["compress_all_res", {"multiplier": 2}], ["res_x", _RES],
                       ["compress_all_res", {"multiplier": 2}], ["res_x", _RES]],
    "decoder_blocks": [["res_x", {**_RES, "inject_noise": False}], ["compress_all", _UP],
                       ["res_x", {**_RES, "inject_noise": False}], ["compress_all", _UP],
                       ["res_x", {**_RES, "inject_noise": False}], ["compress_all", _UP],
                       ["res_x", {**_RES, "inject_noise": False}]],
}
TINY_VAE_2_3 = {
    **TINY_VAE, "spatial_padding_mode": "zeros",
    "encoder_blocks": [["res_x", _RES], ["compress_space_res", {"multiplier": 2}], ["res_x", {"num_layers": 2}],
                       ["compress_time_res", {"multiplier": 2}], ["res_x", _RES],
                       ["compress_all_res", {"multiplier": 2}], ["res_x", _RES],
                       ["compress_all_res", {"multiplier": 1}], ["res_x", _RES]],
    "decoder_blocks": [["res_x", _RES], ["compress_space", {"multiplier": 2}], ["res_x", {"num_layers": 2}],
                       ["compress_time", {"multiplier": 2}], ["res_x", _RES], ["compress_all", {"multiplier": 1}],
                       ["res_x", _RES], ["compress_all", {"multiplier": 2}], ["res_x", _RES]],
}
TINY_VAES = {"2.0": TINY_VAE, "2.3": TINY_VAE_2_3}  # 16 latent channels: the parity tests' fast VAEs
CHECKPOINT_VAES = DEMO_VAES  # 128 latent channels, as the tiny transformers' latents: the tiny checkpoints' VAEs


# the `vae` sections of ltx-2-19b-dev and ltx-2.3-22b-dev (spec §3, §8)
RELEASED_VAE_2_0 = RELEASED_VAE_SECTIONS["2.0"]
RELEASED_VAE_2_3 = RELEASED_VAE_SECTIONS["2.3"]

# the audio sections of the demo model: the released structure at toy widths
TINY_AUDIO_VAE = DEMO_AUDIO_VAE
TINY_VOCODERS = DEMO_VOCODERS
# the released widths in that structure (spec §4): the audio VAE decoder's two residual blocks a level, HiFi-GAN
# 1,024 wide (2.0), BigVGAN-v2 1,536 wide with its 512-wide bandwidth extension (2.3 and 2.5)
RELEASED_AUDIO_VAE = {**DEMO_AUDIO_VAE, "model": {"params": {
    **DEMO_AUDIO_VAE["model"]["params"],
    "ddconfig": {**DEMO_AUDIO_VAE["model"]["params"]["ddconfig"], "num_res_blocks": 2}}}}
RELEASED_VOCODERS = {
    "2.0": {**DEMO_VOCODERS["2.0"], "upsample_initial_channel": 1024},
    "2.3": {"vocoder": {**DEMO_VOCODERS["2.3"]["vocoder"], "upsample_initial_channel": 1536},
            "bwe": {**DEMO_VOCODERS["2.3"]["bwe"], "upsample_initial_channel": 512}}}

# Gemma 3's text model at toy size: only the sizes differ from Gemma 3 12B (see ltx2_core.model.text.gemma3)
TINY_GEMMA = {"vocab_size": 320, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "query_pre_attn_scalar": 16}
TINY_GEMMA_FEATURES = TINY_GEMMA["hidden_size"] * (TINY_GEMMA["num_hidden_layers"] + 1)

# the transformer section of ltx-2-19b-dev as quoted in the spec (§8); 2.3 adds the keys below
RELEASED_2_0 = {
    "_class_name": "AVTransformer3DModel", "activation_fn": "gelu-approximate", "attention_bias": True,
    "attention_head_dim": 128, "num_attention_heads": 32, "cross_attention_dim": 4096,
    "audio_num_attention_heads": 32, "audio_attention_head_dim": 64, "audio_cross_attention_dim": 2048,
    "audio_in_channels": 128, "audio_out_channels": 128, "audio_positional_embedding_max_pos": [20],
    "av_ca_timestep_scale_multiplier": 1000.0, "av_cross_ada_norm": True, "caption_channels": 3840,
    "causal_temporal_positioning": True, "frequencies_precision": "float64", "in_channels": 128, "out_channels": 128,
    "norm_eps": 1e-6, "norm_elementwise_affine": False, "num_layers": 48,
    "positional_embedding_max_pos": [20, 2048, 2048],
    "positional_embedding_theta": 10000.0, "positional_embedding_type": "rope", "qk_norm": "rms_norm",
    "rope_type": "split", "standardization_norm": "rms_norm", "timestep_scale_multiplier": 1000,
    "use_audio_video_cross_attention": True, "use_embeddings_connector": True, "use_middle_indices_grid": True,
    "dropout": 0.0, "num_embeds_ada_norm": 1000, "share_ff": False, "num_vector_embeds": None,
    "use_linear_projection": False, "only_cross_attention": False, "cross_attention_norm": True,
    "double_self_attention": False, "upcast_attention": False,
    "connector_attention_head_dim": 128, "connector_num_attention_heads": 30, "connector_num_layers": 2,
    "connector_num_learnable_registers": 128, "connector_positional_embedding_max_pos": [4096],
    "connector_norm_output": True,
}
RELEASED_2_3 = {
    **RELEASED_2_0, "apply_gated_attention": True, "cross_attention_adaln": True, "caption_proj_before_connector": True,
    "caption_projection_first_linear": False, "caption_projection_second_linear": False,
    "caption_proj_input_norm": False, "text_encoder_norm_type": "per_token_rms",
    "connector_apply_gated_attention": True, "connector_num_attention_heads": 32, "connector_num_layers": 8,
    "audio_connector_num_attention_heads": 32, "audio_connector_attention_head_dim": 64,
}

# LTX-2.5's transformer as ltx-core 1.2.0 reads it: 2.3's keys plus the three 2.5 switches. No 2.5 header was at hand:
# the values are those the reference's comments give ("LTX 2.5 (gemma4) sets ff_bias=false"; K/V computed once per
# prompt), to check against the released file
RELEASED_2_5 = {**RELEASED_2_3, "ff_bias": False, "audio_ff_bias": False, "use_prompt_adaln_single": False}
# what a 2.5 transformer file names as its text encoder (`gemma_source_checkpoint` metadata, checked against the text
# encoder's `gemma_config.gemma_version` by the reference); the value the issue quotes
GEMMA_SOURCE_2_5 = {"gemma_version": "gemma4-12b-ltx-v1"}


def bf16_built(build, *args):
    """`build(*args)` with bf16 (the released dtype) as the default dtype: inside a FakeTensorMode, a module of the
    released sizes without memory."""
    import torch

    torch.set_default_dtype(torch.bfloat16)
    try:
        return build(*args)
    finally:
        torch.set_default_dtype(torch.float32)


def bf16_transformer(config):
    """Our transformer of `config` built in bf16 (`bf16_built`)."""
    from ltx2_core.model.transformer import LTX2Transformer

    return bf16_built(LTX2Transformer, config)


def released_transformer_configs() -> dict:
    """The released transformers' configs by version (for byte counts and plans at full size)."""
    from ltx2_core import TransformerConfig

    return {"2.0": TransformerConfig.from_metadata(RELEASED_2_0, "2.0.0"),
            "2.3": TransformerConfig.from_metadata(RELEASED_2_3, "2.3.0"),
            "2.5": TransformerConfig.from_metadata(RELEASED_2_5, "2.5.0")}
