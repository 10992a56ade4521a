"""Video VAE (spec §3): encoder, decoder and tiled decoding, configured from the checkpoint's `vae` metadata."""

from ltx2_core.model.video_vae.config import VaeBlock, VideoVaeConfig
from ltx2_core.model.video_vae.decoder import VideoDecoder
from ltx2_core.model.video_vae.encoder import VideoEncoder

__all__ = ["VaeBlock", "VideoDecoder", "VideoEncoder", "VideoVaeConfig"]
