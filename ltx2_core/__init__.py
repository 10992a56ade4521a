"""ltx2_core: Lightricks' LTX-2 / LTX-2.3 audio+video model, importable and usable without ComfyUI."""

from ltx2_core.config import ModelVersion, StreamConfig, TransformerConfig
from ltx2_core.model.audio_vae import AudioDecoder, AudioDecoderConfig, VocoderConfig, build_vocoder, decode_audio
from ltx2_core.model.transformer import BatchPerturbations, LTX2Transformer, to_x0
from ltx2_core.model.upsampler import LatentUpsampler, UpsamplerConfig, upsample_latent
from ltx2_core.model.video_vae import VideoDecoder, VideoEncoder, VideoVaeConfig
from ltx2_core.model.video_vae.tiling import TilingConfig, decode_video
from ltx2_core.types import PassPerturbation, Rope, RunConstants, StreamInput

__all__ = [
    "AudioDecoder",
    "AudioDecoderConfig",
    "BatchPerturbations",
    "LTX2Transformer",
    "LatentUpsampler",
    "ModelVersion",
    "PassPerturbation",
    "Rope",
    "RunConstants",
    "StreamConfig",
    "StreamInput",
    "TilingConfig",
    "TransformerConfig",
    "UpsamplerConfig",
    "VideoDecoder",
    "VideoEncoder",
    "VideoVaeConfig",
    "VocoderConfig",
    "build_vocoder",
    "decode_audio",
    "decode_video",
    "to_x0",
    "upsample_latent",
]
