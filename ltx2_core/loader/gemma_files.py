"""Locating the text encoder's language model in the two layouts users have (spec §2), from headers only:

* ComfyUI's single file (`models/text_encoders/gemma_3_12B_it*.safetensors`): keys `model.layers.N.…`, the
  SentencePiece model as the uint8 tensor `spiece_model`, no config (the backbone recognised by its weight names
  reads its sizes from the weight shapes);
* LTX-2.5's single file (`text_encoders/gemma4-12b-with-proj-ltx-2.5-bf16.safetensors`, layout "lightricks"): the
  config.json as the `gemma_config` metadata (its `model_type` picks the backbone, its `gemma_version` names the
  checkpoint), flat `model.*` language-model keys, tokenizer.json as the uint8 tensor `tokenizer_json` and
  tokenizer_config.json as `hf_asset__tokenizer_config.json`, the text projection beside them;
* a Hugging Face model folder: `config.json` (its `model_type` picks the backbone), safetensors shards (keys
  `language_model.model.…` or `model.language_model.…`), tokenizer files.

The family-specific rules (config values, weight names, the model) belong to the `TextBackbone` found in the
registry (`model.text.backbone`; Gemma 3 today). Only the language-model tensors are ever read; the vision tower and
projector stay on disk.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ltx2_core.errors import CheckpointError, KeyMismatchError, NotSafetensorsError, ShapeMismatchError
from ltx2_core.loader.checkpoint import check_tensors
from ltx2_core.quant.files import StoredFormats, default_scales, install_layers, read_formats
from ltx2_core.loader.safetensors_file import SafetensorsFile, folder_listing, read_header, read_tensors
from ltx2_core.loader.text_parts import TextPart, part_state
from ltx2_core.model.text.backbone import DEFAULT, TextBackbone, backbone_for, backbone_for_keys, registered
from ltx2_core.model.text.chat import eos_ids
from ltx2_core.model.text.tokenizer import PromptTokenizer, tokenizer_config_json

# where the language model sits in each layout, most specific first
LM_PREFIXES = ("model.language_model.", "language_model.model.", "model.")
TOKENIZER_KEY = "spiece_model"
CONFIG_METADATA = "gemma_config"  # LTX-2.5's file: the Hugging Face config.json as JSON metadata
TOKENIZER_JSON_KEY = "tokenizer_json"  # … and tokenizer.json as a uint8 tensor
TOKENIZER_CONFIG_KEY = "hf_asset__tokenizer_config.json"  # … tokenizer_config.json likewise (metadata: fallback)
CHAT_TEMPLATE_KEY = "hf_asset__chat_template.jinja"  # … and Gemma's chat template, when the file has one
# what sits under the bare "model." prefix beside the language model: vision/audio parts, an LTX model's tensors
_NOT_LM = ("vision_tower.", "multi_modal_projector.", "language_model.", "diffusion_model.", "vision_embedder.",
           "embed_vision.", "embed_audio.", "audio_tower.")
_FLOAT_DTYPES = ("F32", "F16", "BF16")


@dataclass(frozen=True)
class GemmaSource:
    """A language model found on disk: its backbone, config values and, per shard, model key -> file key."""

    path: Path
    layout: str  # "comfyui" (single file), "lightricks" (single file with gemma_config) or "huggingface" (folder)
    config: Mapping[str, Any]
    shards: tuple[tuple[SafetensorsFile, Mapping[str, str]], ...] = field(repr=False)
    backbone: TextBackbone = DEFAULT
    eos_ids: tuple[int, ...] | None = None  # the config's eos_token_id (None: no config, Gemma 3's released ids)

    @property
    def gemma_version(self) -> str | None:
        """The checkpoint's name in its config (`gemma_version`, LTX-2.5's files), which a 2.5 transformer names."""
        return self.config.get("gemma_version")

    @property
    def hidden_size(self) -> int:
        return int(self.config["hidden_size"])

    @property
    def num_hidden_states(self) -> int:
        """Layers + 1: the embeddings and every layer's output."""
        return int(self.config["num_hidden_layers"]) + 1

    def tokenizer(self, max_length: int | None = None) -> PromptTokenizer:
        tokenizer = self._tokenizer(max_length)
        if tokenizer.chat is not None and self.eos_ids is not None:
            tokenizer.chat = dataclasses.replace(tokenizer.chat, eos_ids=self.eos_ids)
        return tokenizer

    def _tokenizer(self, max_length: int | None) -> PromptTokenizer:
        kwargs = {} if max_length is None else {"max_length": max_length}
        if self.layout == "huggingface":
            return PromptTokenizer.from_folder(self.path, **kwargs)
        file, _ = self.shards[0]
        if self.layout == "lightricks":
            return _json_tokenizer(file, self.path, kwargs)
        if TOKENIZER_KEY not in file.tensors:
            raise CheckpointError(f"{self.path}: no embedded tokenizer ('{TOKENIZER_KEY}'); use ComfyUI's "
                                  "gemma_3_12B_it*.safetensors text encoder or a Hugging Face Gemma 3 folder")
        blob = read_tensors(file, {"spm": TOKENIZER_KEY})["spm"]
        return PromptTokenizer.from_sentencepiece(blob.numpy().tobytes(), str(self.path), **kwargs)


def find_gemma(path: str | os.PathLike) -> GemmaSource:
    """Inspects a text-encoder file (ComfyUI's or LTX-2.5's) or a Hugging Face folder (headers only) and checks it is
    a registered backbone (Gemma 3 or Gemma 4)."""
    path = Path(path)
    if path.is_dir():
        return _from_folder(path)
    file = read_header(path, "text encoder")
    if CONFIG_METADATA in file.metadata:
        return _from_lightricks_file(file, path)
    prefix = _lm_prefix(file, path)
    keys = _lm_keys(file, prefix)
    backbone = backbone_for_keys(keys)
    if TOKENIZER_JSON_KEY in file.tensors:  # LTX-2.5's layout with its config stripped
        raise CheckpointError(f"{path}: an LTX-2.5 text encoder without its '{CONFIG_METADATA}' metadata (the JSON "
                              "of its Hugging Face config.json); the released gemma4-12b-with-proj-ltx-2.5-bf16."
                              "safetensors carries it: download that file again")
    shapes = {key: file.tensors[file_key].shape for key, file_key in keys.items()}
    return GemmaSource(path, "comfyui", backbone.values_from_shapes(shapes, str(path)), ((file, keys),), backbone)


def load_gemma(source: GemmaSource, *, device: torch.device | str = "cpu", dtype: torch.dtype | None = None,
               part: TextPart | None = None):
    """The backbone's model (`transformers.Gemma3TextModel`, or our `Gemma4TextModel`) holding the file's weights
    (cast to `dtype`), checked before any read. `part`: only its layers (and embeddings, final norm) are read, the
    rest stays on `meta` at its loaded shape and dtype (`loader.text_parts`)."""
    model = source.backbone.build(source.config)
    plans = [read_formats(file, keys, weight_only=True) for file, keys in source.shards]
    merged = StoredFormats.union(plans)
    # fp8 and nvfp4 layers stay quantised and are dequantised one at a time, as ComfyUI runs its quantised text
    # encoders (no fp8/fp4 matmul)
    expected = install_layers(model, merged, source.path, matmul=False)
    found = merged.keys
    for (file, _), plan in zip(source.shards, plans):
        _check_dtypes(file, {k: fk for k, fk in plan.keys.items() if k not in plan.kept})
    _check_union(source, found, expected)
    if part is not None:
        state = part_state([(file, plan) for (file, _), plan in zip(source.shards, plans)], merged, part, device, dtype)
        model.load_state_dict(state, strict=True, assign=True)
        source.backbone.materialize_buffers(model, device, partial=True)
        if not part.embeddings:
            model.embed_tokens.to("meta")  # its scale too: a rank without the embeddings holds none of them
        return model
    state: dict[str, torch.Tensor] = default_scales(merged, device)
    for (file, _), plan in zip(source.shards, plans):
        state |= read_tensors(file, plan.keys, device=device, dtype=dtype, keep=plan.kept)
    model.load_state_dict(state, strict=True, assign=True)
    source.backbone.materialize_buffers(model, device)
    return model


def _lm_prefix(file: SafetensorsFile, path: Path) -> str:
    for prefix in LM_PREFIXES:
        if prefix + "embed_tokens.weight" in file.tensors:
            return prefix
    raise CheckpointError(f"{path}: not a Gemma 3 text encoder (no 'model.embed_tokens.weight'); "
                          f"{_what_is_it(file.tensors)}. LTX-2 needs Gemma 3 12B: ComfyUI's "
                          "text_encoders/gemma_3_12B_it*.safetensors or a Hugging Face google/gemma-3-12b-it folder")


def _what_is_it(names: Mapping[str, object]) -> str:
    if any(n.startswith("model.diffusion_model.") for n in names):
        return "this is an LTX-2 model checkpoint; choose it as ckpt_name and the Gemma file as text_encoder"
    if "shared.weight" in names or any(n.startswith("encoder.block.") for n in names):
        return "this looks like a T5 encoder (LTX-Video 0.9 used T5; LTX-2 uses Gemma 3)"
    if any(n.startswith(("text_model.", "transformer.text_model.")) for n in names):
        return "this looks like a CLIP text encoder"
    return f"its tensors start with {sorted({n.split('.')[0] for n in names})[:5]}"


def _lm_keys(file: SafetensorsFile, prefix: str) -> dict[str, str]:
    keys = {}
    for name in file.tensors:
        if name.startswith(prefix):
            key = name[len(prefix):]
            # under the bare "model." prefix, nested vision parts and LTX tensors are not language-model keys
            if not key.startswith(_NOT_LM):
                keys[key] = name
    return keys


def _from_lightricks_file(file: SafetensorsFile, path: Path) -> GemmaSource:
    """LTX-2.5's text encoder file (module docstring): config and tokenizer checked from the header."""
    try:
        raw = json.loads(file.metadata[CONFIG_METADATA])
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: the '{CONFIG_METADATA}' metadata is not valid JSON ({exc}); the text "
                              "encoder file is damaged, download it again") from exc
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path}: the '{CONFIG_METADATA}' metadata is not a JSON object")
    backbone = backbone_for(raw.get("model_type"))
    if backbone is None:
        names = " or ".join(b.name for b in registered())
        raise CheckpointError(f"{path}: its {CONFIG_METADATA} names model_type {raw.get('model_type')!r}, not "
                              f"{names}; LTX-2.5 needs gemma4-12b-with-proj-ltx-2.5-bf16.safetensors")
    config = backbone.text_values(raw, str(path))
    if TOKENIZER_JSON_KEY not in file.tensors:
        raise CheckpointError(f"{path}: no embedded tokenizer (the uint8 tensor '{TOKENIZER_JSON_KEY}' holding "
                              "tokenizer.json); the released LTX-2.5 text encoder has it: download it again")
    if TOKENIZER_CONFIG_KEY not in file.tensors and "tokenizer_config.json" not in file.metadata:
        raise CheckpointError(f"{path}: no embedded tokenizer_config.json (the uint8 tensor "
                              f"'{TOKENIZER_CONFIG_KEY}'); the released LTX-2.5 text encoder has it")
    prefix = _lm_prefix(file, path)
    return GemmaSource(path, "lightricks", config, ((file, _lm_keys(file, prefix)),), backbone, eos_ids(raw))


def _json_tokenizer(file: SafetensorsFile, path: Path, kwargs: Mapping[str, Any]) -> PromptTokenizer:
    """The tokenizer of LTX-2.5's file: tokenizer.json and tokenizer_config.json read from their uint8 tensors."""
    names = {"json": TOKENIZER_JSON_KEY}
    if TOKENIZER_CONFIG_KEY in file.tensors:
        names["config"] = TOKENIZER_CONFIG_KEY
    if CHAT_TEMPLATE_KEY in file.tensors:
        names["template"] = CHAT_TEMPLATE_KEY
    blobs = read_tensors(file, names)
    raw_config = blobs["config"].numpy().tobytes() if "config" in blobs else file.metadata["tokenizer_config.json"]
    config = tokenizer_config_json(raw_config, str(path))
    template = blobs["template"].numpy().tobytes().decode() if "template" in blobs else \
        file.metadata.get("chat_template.jinja")
    return PromptTokenizer.from_tokenizer_json(blobs["json"].numpy().tobytes(), config, str(path),
                                               chat_template=template, **kwargs)


def _from_folder(folder: Path) -> GemmaSource:
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise CheckpointError(f"text encoder {folder} is a directory without config.json{folder_listing(folder)}, "
                              "so not a Hugging Face Gemma 3 folder; pass ComfyUI's single file "
                              "gemma_3_12B_it*.safetensors or the google/gemma-3-12b-it folder")
    raw = json.loads(config_file.read_text())
    backbone = backbone_for(raw.get("model_type", DEFAULT.model_types[-1]))
    if backbone is None:
        names = " or ".join(b.name for b in registered())
        types = " or ".join(repr(t) for b in registered() for t in b.model_types)
        raise CheckpointError(f"{config_file}: model_type {raw.get('model_type')!r} is not {names} "
                              f"(expected {types}); LTX-2 needs Gemma 3 12B")
    config = backbone.text_values(raw, str(config_file))
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        pickles = sorted(p.name for p in folder.glob("*.bin"))
        raise NotSafetensorsError(f"{folder}: no .safetensors weights" + (f" (found {pickles[:3]})" if pickles else "")
                                  + "; only safetensors are loaded, never pickles: download the safetensors release")
    shards = []
    for path in files:
        file = read_header(path, "text encoder")
        prefix = next((p for p in LM_PREFIXES if any(n.startswith(p) for n in file.tensors)), None)
        keys = _lm_keys(file, prefix) if prefix else {}
        if keys:
            shards.append((file, keys))
    if not shards:
        raise CheckpointError(f"{folder}: its safetensors files hold no Gemma language-model tensors "
                              f"(expected keys under one of {LM_PREFIXES})")
    return GemmaSource(folder, "huggingface", config, tuple(shards), backbone, eos_ids(raw))


def _check_dtypes(file: SafetensorsFile, keys: Mapping[str, str]) -> None:
    odd = sorted({file.tensors[k].dtype for k in keys.values()} - set(_FLOAT_DTYPES))
    if odd:
        raise CheckpointError(f"{file.path}: language-model weights stored as {odd}; text encoders load in bf16, "
                              "fp16, fp32 or float8_e4m3fn (gemma_3_12B_it.safetensors or its fp8_scaled file)")


def _check_union(source: GemmaSource, found: Mapping[str, str], expected: Mapping[str, tuple[int, ...]]) -> None:
    """Key and shape check over all shards, naming the file of each offending tensor."""
    owner = {file_key: file for file, keys in source.shards for file_key in keys.values()}
    merged = SafetensorsFile(source.path, {}, {fk: owner[fk].tensors[fk] for fk in found.values()})
    try:
        check_tensors(merged, found, expected, component=f"{source.backbone.name} language model")
    except (KeyMismatchError, ShapeMismatchError) as exc:
        raise type(exc)(f"{exc} (config: {source.layout} layout, {source.config.get('num_hidden_layers')} layers, "
                        f"hidden size {source.config.get('hidden_size')})") from exc
