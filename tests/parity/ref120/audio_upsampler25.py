"""1.2.0 side of tests/parity/test_video_vae25_parity.py for the audio and the upsampler of LTX-2.5: builds the
audio decoder, the vocoder and the latent upsampler from the tiny files the test wrote, through the reference's
own builder and key filters, and runs them on the test's inputs."""

import torch
from exchange import inputs, outputs

from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
from ltx_core.model.audio_vae.model_configurator import (
    AUDIO_VAE_DECODER_COMFY_KEYS_FILTER,
    VOCODER_COMFY_KEYS_FILTER,
    AudioDecoderConfigurator,
    VocoderConfigurator,
)
from ltx_core.model.upsampler.model_configurator import LatentUpsamplerConfigurator

tensors, settings = inputs()
cpu = torch.device("cpu")


def build(configurator, path, sd_ops=None):
    return SingleGPUModelBuilder(configurator, path, sd_ops).build(device=cpu, dtype=torch.float32).eval()


decoder = build(AudioDecoderConfigurator, settings["audio"], AUDIO_VAE_DECODER_COMFY_KEYS_FILTER)
vocoder = build(VocoderConfigurator, settings["audio"], VOCODER_COMFY_KEYS_FILTER)
upsampler = build(LatentUpsamplerConfigurator, settings["upsampler"])
mel = decoder(tensors["audio_latent"])
outputs({"mel": mel, "waveform": vocoder(mel), "rate": torch.tensor(vocoder.output_sampling_rate),
         "upsampled": upsampler(tensors["video_latent"])})
