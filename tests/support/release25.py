"""A tiny LTX-2.5 release in ComfyUI's models folder: the seven released files under their released names and in
their folders (both transformers, the Gemma 4 text encoder with its projection, both video VAEs, the audio VAE,
the upsampler, the distilled LoRA) and the duration head (its released file is not public yet: 1.2.0's split
layout, a file of its own), random weights that fit each other (the tiny 2.5 transformer's 128 latent channels; the
Gemma whose `gemma_version` its transformer names), loadable end to end."""

from __future__ import annotations

from pathlib import Path

from ltx2_core.demo import DEMO_VAES
from ltx2_core.model.transformer.config import TransformerConfig
from support.audio25 import write_audio_vae25
from support.duration_head import write_duration_head
from support.gemma4 import write_gemma4_file, write_transformer25_file
from support.model_files import write_lora, write_upsampler
from support.video_vae25 import TINY_DIFFUSION_VAE, write_conv_vae25, write_diffusion_vae

# field -> (ComfyUI folder, released file name)
FILES = {
    "dev": ("diffusion_models", "ltx-2.5-22b-dev-transformer-bf16.safetensors"),
    "distilled": ("diffusion_models", "ltx-2.5-22b-distilled-transformer-bf16.safetensors"),
    "text_encoder": ("text_encoders", "gemma4-12b-with-proj-ltx-2.5-bf16.safetensors"),
    "vae": ("vae", "ltx-2.5-video-vae-bf16.safetensors"),
    "conv_vae": ("vae", "ltx-2.5-video-vae-conv-bf16.safetensors"),
    "audio_vae": ("vae", "ltx-2.5-audio-vae-bf16.safetensors"),
    "upsampler": ("latent_upscale_models", "ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors"),
    "distilled_lora": ("loras", "ltx-2.5-22b-distilled-lora-450-bf16.safetensors"),
    # not public yet: a file of its own (1.2.0's split layout, --duration-head-path), named here by us
    "duration_head": ("diffusion_models", "ltx-2.5-duration-head-bf16.safetensors"),
}


def write_release25(models: Path) -> dict[str, Path]:
    """Writes the release into `models` (ComfyUI's models folder: its sub-folders are made as needed); field -> path."""
    paths = {}
    for field, (folder, name) in FILES.items():
        (models / folder).mkdir(parents=True, exist_ok=True)
        paths[field] = models / folder / name
    write_transformer25_file(paths["dev"], seed=0)
    write_transformer25_file(paths["distilled"], seed=1)
    write_gemma4_file(paths["text_encoder"])
    write_diffusion_vae(paths["vae"], {**TINY_DIFFUSION_VAE, "latent_channels": 128})
    write_conv_vae25(paths["conv_vae"], DEMO_VAES["2.5"])
    write_audio_vae25(paths["audio_vae"])
    write_upsampler(paths["upsampler"], "2.5")
    write_lora(paths["distilled_lora"], seed=1, version="2.5")
    write_duration_head(paths["duration_head"], TransformerConfig.tiny("2.5"))
    return paths


# DFR's files, not public yet, under the names the DFR example gives them: field -> (ComfyUI folder, file name)
DFR_FILES = {
    "dfr_transformer": ("diffusion_models", "ltx-2.5-22b-dfr-transformer-bf16.safetensors"),
    "temporal_upsampler": ("latent_upscale_models", "ltx-2.5-latent-temporal-upscaler-x2-bf16.safetensors"),
    "detailing_lora": ("loras", "ltx-2.5-dfr-detailing-ic-lora-bf16.safetensors"),
}


def write_dfr_files(models: Path) -> dict[str, Path]:
    """DFR's files beside a tiny release in `models`: the keyframe-slot transformer (the tiny 2.5 dev transformer
    with `use_keyframes_abs_pos_embedding`), the temporal x2 upsampler, the x2 detailing IC-LoRA
    (reference_downscale_factor 2); field -> path."""
    import dataclasses

    from ltx2_core.demo import demo_transformer
    from support.model_files import write_temporal_upsampler
    from support.transformer25 import write_transformer25

    paths = {}
    for field, (folder, name) in DFR_FILES.items():
        (models / folder).mkdir(parents=True, exist_ok=True)
        paths[field] = models / folder / name
    config = dataclasses.replace(TransformerConfig.tiny("2.5"), keyframe_embedding=True)
    write_transformer25(paths["dfr_transformer"], demo_transformer(config, seed=3).state_dict(), config)
    write_temporal_upsampler(paths["temporal_upsampler"])
    write_lora(paths["detailing_lora"], seed=8, version="2.5", metadata={"reference_downscale_factor": "2"})
    return paths
