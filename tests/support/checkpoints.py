"""Tiny synthetic checkpoints in the official single-file layout (spec §8), written to real safetensors files.

The DiT tensors come from our model; the other components (text connectors, text projection, video VAE, audio VAE,
vocoder) are built from the reference `ltx_core` at tiny sizes, so their key names and the metadata sections are
exactly what the released files use and each loader must pick its own prefix out of the bundle.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from ltx2_core.model.audio_vae.encoder import AudioEncoder, AudioEncoderConfig
from ltx2_core.model.transformer.config import ModelVersion, TransformerConfig
from ltx2_core.model.text.config import FeatureExtractorKind, TextConfig
from support.configs import CHECKPOINT_VAES, TINY_AUDIO_VAE, TINY_GEMMA_FEATURES, TINY_VOCODERS
from support.reference import import_ltx_core, reference_connector

MODEL_VERSIONS = {ModelVersion.V2_0: "2.0.0", ModelVersion.V2_3: "2.3.0"}


def _random_(module: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """Random parameters; constant buffers (anti-alias filters, mel bases) as the module built them; latent
    statistics with std around 1 and mean around 0, as in the released files."""
    if any(t.is_meta for t in module.state_dict().values()):
        module = module.to_empty(device="cpu")
    generator = torch.Generator().manual_seed(seed)
    parameters = {name for name, _ in module.named_parameters()}
    state = {}
    for name, value in module.state_dict().items():
        noise = torch.randn(value.shape, generator=generator) if value.is_floating_point() else None
        if noise is None:
            state[name] = value
        elif name.endswith("std-of-means"):
            state[name] = 1.0 + 0.3 * noise.abs()
        elif name.endswith("mean-of-means"):
            state[name] = 0.3 * noise
        elif name in parameters or not bool(torch.isfinite(value).all()):
            state[name] = noise * 0.05
        else:
            state[name] = value.clone()
    return state


def _prefixed(prefix: str, state: dict[str, torch.Tensor], stats_prefix: str | None = None) -> dict[str, torch.Tensor]:
    out = {}
    for key, value in state.items():
        if stats_prefix and key.startswith("per_channel_statistics."):
            out[stats_prefix + key[len("per_channel_statistics."):]] = value
        else:
            out[prefix + key] = value
    return out


def connector_tensors(version: ModelVersion) -> dict[str, torch.Tensor]:
    """The tiny text connectors of a version under the DiT's prefix, where the bundle (and 2.5's transformer file)
    keep them."""
    import_ltx_core()
    text = TextConfig.tiny(TransformerConfig.tiny(version))
    tensors: dict[str, torch.Tensor] = {}
    for i, (side, c) in enumerate((("video", text.video), ("audio", text.audio))):
        connector = reference_connector(c)
        tensors |= _prefixed(f"model.diffusion_model.{side}_embeddings_connector.", _random_(connector, 10 + i))
    return tensors


@functools.lru_cache(maxsize=2)
def other_components(version: ModelVersion) -> dict[str, torch.Tensor]:
    """Tensors of every non-DiT component of a tiny bundle, under their official keys."""
    import_ltx_core()
    from ltx_core.model.audio_vae import AudioDecoderConfigurator, VocoderConfigurator
    from ltx_core.model.video_vae import VideoDecoderConfigurator, VideoEncoderConfigurator

    text = TextConfig.tiny(TransformerConfig.tiny(version))
    tensors = connector_tensors(version)
    generator = torch.Generator().manual_seed(20)
    randn = lambda *shape: torch.randn(shape, generator=generator)  # noqa: E731
    if text.kind is FeatureExtractorKind.PER_TOKEN_RMS:
        for side, c in (("video", text.video), ("audio", text.audio)):
            prefix = f"text_embedding_projection.{side}_aggregate_embed."
            tensors[prefix + "weight"] = randn(c.width, TINY_GEMMA_FEATURES) / TINY_GEMMA_FEATURES**0.5
            tensors[prefix + "bias"] = randn(c.width)
    else:
        weight = randn(text.video.width, TINY_GEMMA_FEATURES) / TINY_GEMMA_FEATURES**0.5
        tensors["text_embedding_projection.aggregate_embed.weight"] = weight
    vae = {"vae": CHECKPOINT_VAES[version.value]}
    tensors |= _prefixed("vae.decoder.", _random_(VideoDecoderConfigurator.from_config(vae), 21), "vae.per_channel_statistics.")
    tensors |= _prefixed("vae.encoder.", _random_(VideoEncoderConfigurator.from_config(vae), 22), "vae.per_channel_statistics.")
    # the released files carry more statistics than the two the models use; loaders must leave them alone
    for prefix in ("vae.per_channel_statistics.", "audio_vae.per_channel_statistics."):
        for extra in ("channel", "mean-of-stds", "mean-of-stds_over_std-of-means"):
            tensors[prefix + extra] = randn(128)
    audio_vae = AudioDecoderConfigurator.from_config({"audio_vae": TINY_AUDIO_VAE})
    tensors |= _prefixed("audio_vae.decoder.", _random_(audio_vae, 23), "audio_vae.per_channel_statistics.")
    # the audio VAE's encoder, as the released bundles carry it (its statistics are the decoder's, written above)
    encoder = AudioEncoder(AudioEncoderConfig.from_metadata(TINY_AUDIO_VAE))
    tensors |= {"audio_vae.encoder." + key: value for key, value in _random_(encoder, 25).items()
                if not key.startswith("per_channel_statistics.")}
    vocoder = VocoderConfigurator.from_config({"vocoder": TINY_VOCODERS[version.value]})
    tensors |= _prefixed("vocoder.", _random_(vocoder, 24))
    return tensors


def checkpoint_metadata(config: TransformerConfig, model_version: str | None) -> dict[str, str]:
    transformer = config.to_metadata() | TextConfig.tiny(config).to_metadata()
    sections = {"transformer": transformer, "vae": CHECKPOINT_VAES[config.version.value], "audio_vae": TINY_AUDIO_VAE,
                "vocoder": TINY_VOCODERS[config.version.value]}
    metadata = {"config": json.dumps(sections)}
    if model_version is not None:
        metadata["model_version"] = model_version
    return metadata


def write_checkpoint(
    path: Path,
    transformer_state: dict[str, torch.Tensor],
    config: TransformerConfig,
    *,
    metadata: dict[str, str] | None = None,
    with_other_components: bool = True,
) -> Path:
    """Writes a single-file bundle: `model.diffusion_model.<key>` for the DiT plus the other components."""
    tensors = {"model.diffusion_model." + k: v.contiguous() for k, v in transformer_state.items()}
    if with_other_components:
        tensors |= other_components(config.version)
    if metadata is None:
        metadata = checkpoint_metadata(config, MODEL_VERSIONS[config.version])
    save_file(tensors, str(path), metadata=metadata)
    return path
