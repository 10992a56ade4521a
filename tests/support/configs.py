"""Tiny metadata sections of the non-DiT components (the released layout at toy sizes)."""

_RES = {"num_layers": 1}
_UP = {"residual": True, "multiplier": 2}

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

TINY_AUDIO_VAE = {
    "model": {"params": {"ddconfig": {
        "ch": 128, "out_ch": 2, "ch_mult": [1, 2, 4], "num_res_blocks": 1, "attn_resolutions": [],
        "resolution": 256, "z_channels": 8, "norm_type": "pixel", "causality_axis": "height", "dropout": 0.0,
        "mid_block_add_attention": False, "mel_bins": 64}, "sampling_rate": 16000}},
    "preprocessing": {"stft": {"hop_length": 160, "causal": True}},
}

_AMP = {"resblock": "AMP1", "stereo": True, "activation": "snakebeta", "resblock_kernel_sizes": [3, 7, 11],
        "resblock_dilation_sizes": [[1, 3, 5]] * 3, "use_tanh_at_final": False, "use_bias_at_final": False}

TINY_VOCODERS = {
    "2.0": {"resblock": "1", "stereo": True, "upsample_initial_channel": 32, "upsample_rates": [6, 5, 2, 2, 2],
            "upsample_kernel_sizes": [16, 15, 8, 4, 4], "resblock_kernel_sizes": [3, 7, 11],
            "resblock_dilation_sizes": [[1, 3, 5]] * 3, "output_sampling_rate": 24000},
    "2.3": {
        "vocoder": {**_AMP, "upsample_initial_channel": 64, "upsample_rates": [5, 2, 2, 2, 2, 2],
                    "upsample_kernel_sizes": [11, 4, 4, 4, 4, 4]},
        "bwe": {**_AMP, "upsample_initial_channel": 32, "upsample_rates": [6, 5, 2, 2, 2],
                "upsample_kernel_sizes": [12, 11, 4, 4, 4], "apply_final_activation": False,
                "input_sampling_rate": 16000, "output_sampling_rate": 48000, "hop_length": 80, "n_fft": 512,
                "win_size": 512, "num_mels": 64},
    },
}
