"""1.2.0 side of tests/parity/test_video_vae25_parity.py: loads the tiny LTX-2.5 video VAE files the test wrote
with the reference's own builder and key operations, decodes the test's latents (the diffusion decoder with its
eager neighborhood attention, the same seeded generator as the test) and encodes its video (the conv file's encoder)."""

import torch
from exchange import inputs, outputs

from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
from ltx_core.model.video_vae import (
    VAE_ENCODER_COMFY_KEYS_FILTER,
    VideoDecoderConfigurator,
    VideoEncoderConfigurator,
    video_decoder_sd_ops_for_checkpoint,
)
from ltx_core.model.video_vae.transformer.attention import NeighborhoodAttention3D
from ltx_core.model.video_vae.transformer.fallback_na import EagerSdpaAttention
from ltx_core.tiling import DimensionSizeConfig, TileSizeConfig

tensors, settings = inputs()


def build(path, configurator=VideoDecoderConfigurator, sd_ops=None):
    sd_ops = sd_ops or video_decoder_sd_ops_for_checkpoint(path)
    builder = SingleGPUModelBuilder(configurator, path, sd_ops)
    model = builder.build(device=torch.device("cpu"), dtype=torch.float32).eval()
    for module in model.modules():
        if isinstance(module, NeighborhoodAttention3D):  # natten is not installed: its eager fallback
            module.attention_function = EagerSdpaAttention()
    return model


out = {}
diffusion = build(settings["diffusion"])
for name in settings["diffusion_latents"]:
    generator = torch.Generator().manual_seed(settings["seed"])
    out[f"diffusion.{name}"] = diffusion(tensors[name], generator=generator)
tile, overlap = settings["tiling"]
axis = DimensionSizeConfig(tile_size=tile, overlap=overlap)
tiling = TileSizeConfig(frames=DimensionSizeConfig(), height=axis, width=axis)
generator = torch.Generator().manual_seed(settings["seed"])
out["tiled"] = torch.cat(list(diffusion.tiled_decode(tensors[settings["tiled_latent"]], tiling, generator)), dim=2)
conv = build(settings["conv"])
out["conv"] = conv(tensors["conv_latent"])
encoder = build(settings["conv"], VideoEncoderConfigurator, VAE_ENCODER_COMFY_KEYS_FILTER)
out["encoded"] = encoder(tensors["video"])
encoder = build(settings["diffusion"], VideoEncoderConfigurator, VAE_ENCODER_COMFY_KEYS_FILTER)
out["diffusion_encoded"] = encoder(tensors["video"])
outputs(out)
