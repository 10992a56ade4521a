"""ltx2_core: Lightricks' LTX-2 / LTX-2.3 audio+video model, importable and usable without ComfyUI.

The entry points (what the ComfyUI nodes and the command line call):

* a whole generation: `ModelFiles(...).load(device, dtype)` -> `Models`; `generate(Request(...), models)` ->
  `Generation` (frames, waveform, rates) with `.save(path)`; a clip longer than one window:
  `generate_long(Request(frames=frames_for(seconds, fps), windows=Windows(window, overlap, prompts)), models)`;
* each model on its own, from the official single-file checkpoint: `load_transformer`, `load_prompt_encoder`,
  `load_video_decoder`, `load_video_encoder`, `load_audio_decoder`, `load_vocoder`, `load_upsampler`, `load_lora`
  (and `fused_loras` to apply one for a while);
* the stages: `PromptEncoder.encode`, `upsample_latent`, `decode_video`, `decode_audio`;
* the transformer's attention backend: `set_attention(mode, device)` / `with use_attention(mode):` (docs/attention.md).

The model internals (blocks, RoPE, perturbation tensors, the sampler's plan) live in the subpackages.
"""

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.errors import CheckpointError, ConfigError, LTX2Error, NonFiniteError
from ltx2_core.loader import (
    Lora,
    fused_loras,
    load_audio_decoder,
    load_lora,
    load_transformer,
    load_upsampler,
    load_video_decoder,
    load_video_encoder,
    load_vocoder,
)
from ltx2_core.loader.text_weights import load_prompt_encoder
from ltx2_core.model.audio_vae import decode_audio
from ltx2_core.model.transformer.attention_select import set_attention, use_attention
from ltx2_core.model.text import PromptEncoder
from ltx2_core.model.upsampler import upsample_latent
from ltx2_core.model.video_vae.tiling import TilingConfig, decode_video
from ltx2_core.model_files import ModelFiles
from ltx2_core.long_video import generate_long
from ltx2_core.pipeline import Generation, generate
from ltx2_core.request import DEFAULT_NEGATIVE_PROMPT, Request
from ltx2_core.request_checks import MODES
from ltx2_core.request_models import Models
from ltx2_core.releases import ModelVersion
from ltx2_core.sampling import GuidanceParams
from ltx2_core.model.decoders import Decoders
from ltx2_core.types import TextEmbeddings
from ltx2_core.windows import Windows, frames_for

__all__ = [
    "DEFAULT_NEGATIVE_PROMPT",
    "MODES",
    "CheckpointError",
    "ConfigError",
    "Decoders",
    "Generation",
    "GuidanceParams",
    "LTX2Error",
    "Lora",
    "ModelFiles",
    "ModelVersion",
    "Models",
    "NonFiniteError",
    "PromptEncoder",
    "Request",
    "TextEmbeddings",
    "TilingConfig",
    "TransformerConfig",
    "Windows",
    "decode_audio",
    "decode_video",
    "frames_for",
    "fused_loras",
    "generate",
    "generate_long",
    "load_audio_decoder",
    "load_lora",
    "load_prompt_encoder",
    "load_transformer",
    "load_upsampler",
    "load_video_decoder",
    "load_video_encoder",
    "load_vocoder",
    "set_attention",
    "upsample_latent",
    "use_attention",
]
