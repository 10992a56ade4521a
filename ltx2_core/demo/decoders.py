"""The tiny random-weight decoders of the demo model (video VAE decoder, audio VAE decoder, vocoder) and its x2
latent upsampler.

Their metadata sections have the released structure (spec §3, §4) at toy widths; the tests' tiny checkpoints
bundle the same sections, so a checkpoint's VAE fits the 128-channel latents of the tiny transformers. LTX-2.5's
demo uses its convolutional video VAE (the release also ships a diffusion decoder; `tests/support/video_vae25.py`
writes both), its vocoder and audio VAE have 2.3's structure (1.2.0 reads them alike).
"""

from __future__ import annotations

import torch

from ltx2_core.geometry import AUDIO_HOP, AUDIO_SAMPLE_RATE
from ltx2_core.model.audio_vae import (
    AudioDecoder,
    AudioDecoderConfig,
    AudioEncoder,
    AudioEncoderConfig,
    VocoderConfig,
    build_vocoder,
)
from ltx2_core.model.upsampler import LatentUpsampler, UpsamplerConfig
from ltx2_core.model.video_vae import VideoDecoder, VideoEncoder, VideoVaeConfig
from ltx2_core.releases import DEFAULT_VERSION
from ltx2_core.model.decoders import Decoders

_ONE = {"num_layers": 1}
# the encoder's width starts at the latent width (128); multiplier 1 keeps it there instead of growing to 2048
_ENCODER_BLOCKS = [["res_x", _ONE], ["compress_space_res", {"multiplier": 1}], ["res_x", _ONE],
                   ["compress_time_res", {"multiplier": 1}], ["res_x", _ONE], ["compress_all_res", {"multiplier": 1}],
                   ["res_x", _ONE], ["compress_all_res", {"multiplier": 1}], ["res_x", _ONE]]
_VAE = {"dims": 3, "in_channels": 3, "out_channels": 3, "latent_channels": 128, "patch_size": 4,
        "norm_layer": "pixel_norm", "latent_log_var": "uniform", "causal_decoder": False, "decoder_base_channels": 8,
        "timestep_conditioning": False, "encoder_blocks": _ENCODER_BLOCKS}
DEMO_VAES = {
    # 2.0: three residual ×2 stages, reflect padding; 2.3: time and space upsampled separately, zeros padding
    "2.0": {**_VAE, "decoder_blocks": [["res_x", _ONE], ["compress_all", {"residual": True, "multiplier": 2}]] * 3
            + [["res_x", _ONE]]},
    "2.3": {**_VAE, "spatial_padding_mode": "zeros", "decoder_blocks": [
        ["res_x", _ONE], ["compress_space", {"multiplier": 2}], ["res_x", _ONE], ["compress_time", {"multiplier": 2}],
        ["res_x", _ONE], ["compress_all", {"multiplier": 1}], ["res_x", _ONE], ["compress_all", {"multiplier": 2}],
        ["res_x", _ONE]]},
    # 2.5's convolutional VAE: the bottleneck is base × the blocks' multipliers (1.2.0), here 4×, with a plain
    # time step between two ×2 stages of space (tests/support/video_vae25.py writes the same form)
    "2.5": {**_VAE, "_class_name": "CausalVideoAutoencoder", "spatial_padding_mode": "zeros", "decoder_blocks": [
        ["res_x", _ONE], ["compress_all", {"multiplier": 2}], ["res_x", _ONE], ["compress_time", {"multiplier": 1}],
        ["res_x", _ONE], ["compress_space", {"multiplier": 2}], ["compress_all", {"multiplier": 1}]]},
}

DEMO_AUDIO_VAE = {
    "model": {"params": {"ddconfig": {
        "ch": 128, "out_ch": 2, "ch_mult": [1, 2, 4], "num_res_blocks": 1, "attn_resolutions": [],
        "resolution": 256, "z_channels": 8, "norm_type": "pixel", "causality_axis": "height", "dropout": 0.0,
        "mid_block_add_attention": False, "mel_bins": 64}, "sampling_rate": AUDIO_SAMPLE_RATE}},
    "preprocessing": {"stft": {"hop_length": AUDIO_HOP, "causal": True}},
}

_AMP = {"resblock": "AMP1", "stereo": True, "activation": "snakebeta", "resblock_kernel_sizes": [3, 7, 11],
        "resblock_dilation_sizes": [[1, 3, 5]] * 3, "use_tanh_at_final": False, "use_bias_at_final": False}
DEMO_VOCODERS = {
    "2.0": {"resblock": "1", "stereo": True, "upsample_initial_channel": 32, "upsample_rates": [6, 5, 2, 2, 2],
            "upsample_kernel_sizes": [16, 15, 8, 4, 4], "resblock_kernel_sizes": [3, 7, 11],
            "resblock_dilation_sizes": [[1, 3, 5]] * 3, "output_sampling_rate": 24000},
    "2.3": {
        "vocoder": {**_AMP, "upsample_initial_channel": 64, "upsample_rates": [5, 2, 2, 2, 2, 2],
                    "upsample_kernel_sizes": [11, 4, 4, 4, 4, 4]},
        "bwe": {**_AMP, "upsample_initial_channel": 32, "upsample_rates": [6, 5, 2, 2, 2],
                "upsample_kernel_sizes": [12, 11, 4, 4, 4], "apply_final_activation": False,
                "input_sampling_rate": AUDIO_SAMPLE_RATE, "output_sampling_rate": 48000, "hop_length": 80, "n_fft": 512,
                "win_size": 512, "num_mels": 64},
    },
}
DEMO_VOCODERS["2.5"] = DEMO_VOCODERS["2.3"]  # BigVGAN-v2 + bandwidth extension, 48 kHz, as 2.3

# the released x2 upsamplers' form: LTX-2.0's rational resampler, LTX-2.3's plain one (model/upsampler.py); 2.5's
# file is read with 1.2.0's defaults (plain)
DEMO_RATIONAL_UPSAMPLERS = {"2.0": True, "2.3": False, "2.5": False}
DEMO_UPSAMPLER_WIDTH = 32


def demo_decoders(version: str = DEFAULT_VERSION, seed: int = 0) -> Decoders:
    """Random-weight decoders of the given structure, in eval mode on the CPU (statistics: identity)."""
    generator = torch.Generator().manual_seed(seed)
    decoders = Decoders(VideoDecoder(VideoVaeConfig.from_metadata(DEMO_VAES[version])),
                        AudioDecoder(AudioDecoderConfig.from_metadata(DEMO_AUDIO_VAE)),
                        build_vocoder(VocoderConfig.from_metadata(DEMO_VOCODERS[version])))
    for module, gain in zip(decoders, (1.0, 1.0, 0.5)):
        _random_(module, generator, gain)
    return Decoders(*(module.eval() for module in decoders))


@torch.no_grad()
def _random_(module: torch.nn.Module, generator: torch.Generator, gain: float = 1.0) -> None:
    """N(0, gain²/fan_in) parameters, so activations keep their scale through the layers."""
    for param in module.parameters():
        fan_in = param[0].numel() if param.dim() > 1 else 100
        param.copy_(torch.randn(param.shape, generator=generator) * gain / fan_in**0.5)


def demo_video_encoder(version: str = DEFAULT_VERSION, seed: int = 4) -> VideoEncoder:
    """A random-weight video VAE encoder of the demo VAE's structure (for image conditioning), eval, on the CPU."""
    encoder = VideoEncoder(VideoVaeConfig.from_metadata(DEMO_VAES[version]))
    _random_(encoder, torch.Generator().manual_seed(seed))
    return encoder.eval()


def demo_audio_encoder(seed: int = 5) -> AudioEncoder:
    """A random-weight audio VAE encoder of the demo audio VAE's structure (for audio conditioning), eval, on the
    CPU; its latent statistics are the identity, as the demo decoder's."""
    encoder = AudioEncoder(AudioEncoderConfig.from_metadata(DEMO_AUDIO_VAE))
    _random_(encoder, torch.Generator().manual_seed(seed))
    return encoder.eval()


def demo_upsampler(version: str = DEFAULT_VERSION, seed: int = 0) -> LatentUpsampler:
    """A random-weight x2 upsampler of the released form (2.0 rational, 2.3 plain) for 128-channel latents."""
    config = UpsamplerConfig(in_channels=128, mid_channels=DEMO_UPSAMPLER_WIDTH, num_blocks_per_stage=1, spatial_scale=2.0,
                             rational_resampler=DEMO_RATIONAL_UPSAMPLERS[version])
    upsampler = LatentUpsampler(config)
    _random_(upsampler, torch.Generator().manual_seed(seed))
    return upsampler.eval()
