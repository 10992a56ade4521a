"""Video VAE (spec §3): encoder, decoder and tiled decoding, configured from the checkpoint's `vae` metadata; LTX-2.5's
diffusion decoder beside the convolutional one."""

from ltx2_core.model.video_vae.config import VaeBlock, VideoVaeConfig
from ltx2_core.model.video_vae.decoder import VideoDecoder
from ltx2_core.model.video_vae.diffusion_config import DiffusionDecoderConfig
from ltx2_core.model.video_vae.diffusion_decoder import DiffusionVideoDecoder
from ltx2_core.model.video_vae.encoder import VideoEncoder

__all__ = ["DiffusionDecoderConfig", "DiffusionVideoDecoder", "VaeBlock", "VideoDecoder", "VideoEncoder",
           "VideoVaeConfig"]
