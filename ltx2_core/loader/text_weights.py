"""The text path of an LTX-2 checkpoint and the whole prompt encoder (Gemma file + checkpoint), checked before loading.

In the single-file checkpoint the feature extractor is `text_embedding_projection.*` and the connectors share the
DiT prefix (`model.diffusion_model.{video,audio}_embeddings_connector.*`, spec §8); they map onto `TextProjection`'s
`feature_extractor.*`, `video_connector.*` and `audio_connector.*`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import torch

from ltx2_core.errors import CheckpointError, ConfigError, MissingConfigError
from ltx2_core.loader.checkpoint import check_tensors, config_metadata, transformer_config
from ltx2_core.loader.gemma_files import GemmaSource, find_gemma, load_gemma
from ltx2_core.loader.safetensors_file import SafetensorsFile, read_header, read_tensors
from ltx2_core.memory.offload import stream_text_encoder
from ltx2_core.model.text.encoder import PromptEncoder, check_prompt_length
from ltx2_core.model.text.projection import TextProjection
from ltx2_core.model.text.config import TextConfig
from ltx2_core.quant.files import StoredFormats, default_scales, install_layers, read_formats

TEXT_KEY_PREFIXES = {
    "text_embedding_projection.": "feature_extractor.",
    "model.diffusion_model.video_embeddings_connector.": "video_connector.",
    "model.diffusion_model.audio_embeddings_connector.": "audio_connector.",
}
_FEATURE_WEIGHTS = ("text_embedding_projection.aggregate_embed.weight",
                    "text_embedding_projection.video_aggregate_embed.weight")


def text_keys(names: Mapping[str, object]) -> dict[str, str]:
    """Model key -> file key of the text projection and connectors."""
    keys = {}
    for name in names:
        for file_prefix, model_prefix in TEXT_KEY_PREFIXES.items():
            if name.startswith(file_prefix):
                keys[model_prefix + name[len(file_prefix):]] = name
    return keys


def text_config(file: SafetensorsFile) -> TextConfig:
    section = config_metadata(file).get("transformer")
    if section is None:
        raise MissingConfigError(f"{file.path}: the 'config' metadata has no 'transformer' section; is this an "
                                 "LTX-2 model checkpoint?")
    try:
        return TextConfig.from_metadata(section)
    except ConfigError as exc:
        raise type(exc)(f"{file.path}: {exc}") from exc


def feature_width(file: SafetensorsFile) -> int:
    """Input width of the checkpoint's text projection: Gemma hidden size × hidden states (188160 for 12B)."""
    for name in _FEATURE_WEIGHTS:
        if name in file.tensors:
            return file.tensors[name].shape[1]
    raise CheckpointError(f"{file.path}: no text projection ({' or '.join(_FEATURE_WEIGHTS)}); prompts need the "
                          "full LTX-2 checkpoint, not a transformer-only or distilled-LoRA file")


def check_compatible(gemma: GemmaSource, checkpoint: SafetensorsFile) -> None:
    """The Gemma model must produce exactly the features the checkpoint's projection was trained on."""
    features = feature_width(checkpoint)
    produced = gemma.hidden_size * gemma.num_hidden_states
    if produced != features:
        raise CheckpointError(
            f"text encoder {gemma.path} does not fit checkpoint {checkpoint.path}: its hidden size "
            f"{gemma.hidden_size} × {gemma.num_hidden_states} hidden states gives {produced} features, but the "
            f"checkpoint's text projection takes {features} (Gemma 3 12B: 3840 × 49 = 188160). Use the Gemma 3 12B "
            "text encoder LTX-2 was trained with (gemma_3_12B_it*.safetensors)."
        )


def _projection_on_meta(checkpoint: SafetensorsFile, gemma: GemmaSource) -> tuple[TextProjection, StoredFormats]:
    """The projection built on `meta` and its key map (with the linears an fp8 file stores in fp8, e.g. ComfyUI's
    fp8_scaled connectors), validated against the file (nothing read yet)."""
    check_compatible(gemma, checkpoint)
    config = text_config(checkpoint)
    try:
        config.check_matches(transformer_config(checkpoint))
    except ConfigError as exc:
        raise type(exc)(f"{checkpoint.path}: {exc}") from exc
    with torch.device("meta"):
        projection = TextProjection(config, gemma.hidden_size, gemma.num_hidden_states)
    plan = read_formats(checkpoint, text_keys(checkpoint.tensors))
    expected = install_layers(projection, plan, checkpoint.path)
    check_tensors(checkpoint, plan.keys, expected, component="text projection and connectors")
    return projection, plan


def _fill(projection: TextProjection, checkpoint: SafetensorsFile, plan: StoredFormats,
          device: torch.device | str, dtype: torch.dtype | None) -> TextProjection:
    state = read_tensors(checkpoint, plan.keys, device=device, dtype=dtype, keep=plan.kept)
    projection.load_state_dict(state | default_scales(plan, device), strict=True, assign=True)
    return projection.eval().requires_grad_(False)


def load_text_projection(
    checkpoint: str | os.PathLike,
    gemma: GemmaSource,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
) -> TextProjection:
    """The checkpoint's feature extractor + connectors, sized for (and checked against) the Gemma model."""
    file = read_header(checkpoint)
    projection, plan = _projection_on_meta(file, gemma)
    return _fill(projection, file, plan, device, dtype)


def load_prompt_encoder(
    text_encoder: str | os.PathLike,
    checkpoint: str | os.PathLike,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
    offload_device: torch.device | str | None = None,
    max_length: int | None = None,
    stream_layers: bool = False,
    pin: bool = True,
) -> PromptEncoder:
    """Gemma (ComfyUI file or HF folder) + the checkpoint's text path, as one `PromptEncoder`.

    Both files are inspected and cross-checked (family, sizes, key sets, shapes, tokenizer) before any weight is
    read. Weights load onto `offload_device` when given (they visit `device` only while encoding), else `device`.
    `stream_layers`: Gemma's decoder layers stay in host memory (pinned unless `pin` is False) and are streamed to
    `device` one at a time while encoding; its embeddings and norms and the projection visit `device` only while
    they run (`ltx2_core.memory.offload`): a 16 GB card encodes without holding Gemma's 24 GB, and samples without
    the text side.
    """
    if stream_layers:
        encoder = load_prompt_encoder(text_encoder, checkpoint, device=device, dtype=dtype, offload_device="cpu",
                                      max_length=max_length)
        return stream_text_encoder(encoder, device, pin)
    gemma = find_gemma(text_encoder)
    file = read_header(checkpoint)
    projection, plan = _projection_on_meta(file, gemma)
    tokenizer = gemma.tokenizer(max_length)
    check_prompt_length(tokenizer.max_length, projection.config)
    home = offload_device if offload_device is not None else device
    model = load_gemma(gemma, device=home, dtype=dtype)
    projection = _fill(projection, file, plan, home, dtype)
    return PromptEncoder(tokenizer, model, projection, device=device, offload_device=offload_device)
