"""GGUF files in ComfyUI-GGUF's layout (ggml shapes, block types for 2-D weights, F32 for 1-D tensors and the AdaLN
tables), written with the `gguf` package's `GGUFWriter`; and the split files a GGUF transformer runs with (its text
projection and connectors file, its VAE files), beside the bundle of the same weights dequantised (the twin)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from ltx2_core import TransformerConfig
from ltx2_core.demo import DEMO_VAES, demo_transformer
from ltx2_core.model.transformer.config import ModelVersion
from support.audio25 import write_audio_vae25
from support.checkpoints import MODEL_VERSIONS, checkpoint_metadata, connector_tensors, other_components
from support.gemma4 import write_gemma4_file
from support.gguf_blocks import random_blocks
from support.transformer25 import transformer25_metadata
from support.video_vae25 import write_conv_vae25

PREFIX = "model.diffusion_model."
CONNECTORS = ("video_embeddings_connector.", "audio_embeddings_connector.")


def _gguf():
    import gguf

    return gguf


def type_for(name: str, value: torch.Tensor, quant):
    """The public conversions' choice: block types for 2-D weights whose rows are whole blocks, F32 for 1-D tensors
    and the AdaLN tables, F16 for other 2-D weights."""
    T = _gguf().GGMLQuantizationType
    if value.ndim == 1 or "scale_shift_table" in name:
        return T.F32
    if value.ndim == 2 and value.shape[1] % _gguf().GGML_QUANT_SIZES[quant][0] == 0:
        return quant
    if value.ndim == 2 and value.shape[1] % 32 == 0:
        return T.Q8_0
    return T.F16


def write_gguf(path, state: dict[str, torch.Tensor], quant=None, arch: str | None = "ltxv", prefix: str = "",
               fields: dict[str, str] | None = None, kind=None, quantize=None) -> dict:
    """`state` as a GGUF (names under `prefix`, ggml shapes); -> the type of each tensor. Each tensor's type is
    `kind(name, value)` (default: `type_for` with `quant`, default Q4_K) and its blocks `quantize(data, type)`
    (default `_quantize`: gguf's own, random blocks for the K types it cannot quantise); F32 is stored as it is."""
    gguf = _gguf()
    quant = gguf.GGMLQuantizationType.Q4_K if quant is None else quant
    kind = kind or (lambda name, value: type_for(name, value, quant))
    quantize = quantize or _quantize
    writer = gguf.GGUFWriter(path, arch)
    for key, value in (fields or {}).items():
        writer.add_string(key, value)
    types = {}
    for name, value in state.items():
        types[name] = kind(name, value)
        data = value.detach().float().numpy()
        stored = data if types[name] == gguf.GGMLQuantizationType.F32 else quantize(data, types[name])
        writer.add_tensor(prefix + name, stored, raw_dtype=types[name])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return types


def _quantize(data: np.ndarray, kind) -> np.ndarray:
    """gguf's own quantisation, or random blocks of small scales for the types it cannot quantise (K types)."""
    gguf = _gguf()
    if kind == gguf.GGMLQuantizationType.F32:
        return data
    try:
        return gguf.quants.quantize(data, kind)
    except NotImplementedError:
        block, size = gguf.GGML_QUANT_SIZES[kind]
        count = data.size // block
        rng = np.random.default_rng(count)
        return random_blocks(kind.name, count, size, rng, top=0.01).reshape(data.shape[0], -1)


def dequantised(path) -> dict[str, torch.Tensor]:
    """Each tensor of the file as the gguf package dequantises it, in torch shapes (float32)."""
    gguf = _gguf()
    reader = gguf.GGUFReader(path)
    return {t.name: torch.from_numpy(gguf.quants.dequantize(t.data, t.tensor_type).copy()).float().reshape(
        tuple(int(n) for n in reversed(t.shape.tolist()))) for t in reader.tensors}


def write_gguf_model(folder: Path, version: str, *, connectors: bool, quant=None) -> dict[str, Path]:
    """A tiny model of `version` as a user of GGUF has it: the transformer GGUF (bare DiT names; with the text
    connectors when `connectors`), the VAE files (2.0 / 2.3: the bundle's, with their config sections; 2.5: the
    release's), the text projection file (2.0 / 2.3: the projection, and the connectors when the GGUF lacks them,
    under the bundle's keys and without metadata, as ComfyUI's embeddings connector files; 2.5: the connectors only
    when the GGUF lacks them), and `twin`, the same weights dequantised as a safetensors model with its metadata (2.0
    / 2.3: a bundle; 2.5: a transformer file). Field -> path ("text_projection" absent when not needed)."""
    config = TransformerConfig.tiny(version)
    text = connector_tensors(ModelVersion(version))
    state = demo_transformer(config).state_dict()
    if connectors:
        state |= {k[len(PREFIX):]: v for k, v in text.items()}
    paths = {"checkpoint": folder / f"ltx-{version}-tiny-Q8_0.gguf"}
    # 2.0's DiT has no tensor that tells its heads (released: 32): the tiny one's come in a `config` field, the DiT's
    # keys only (the connectors are sized from their shapes)
    fields = {"config": json.dumps({"transformer": config.to_metadata()})} if version == "2.0" else None
    write_gguf(paths["checkpoint"], state, quant or _gguf().GGMLQuantizationType.Q8_0, fields=fields)
    weights = dequantised(paths["checkpoint"])
    dit = {PREFIX + k: v for k, v in weights.items() if not k.startswith(CONNECTORS)}
    twin_text = {PREFIX + k: v for k, v in weights.items() if k.startswith(CONNECTORS)} or text
    write = _files25 if version == "2.5" else _bundle_files
    return paths | write(folder, config, dit | twin_text, {} if connectors else text)


def _files25(folder: Path, config, twin: dict, text: dict) -> dict[str, Path]:
    paths = {"text_encoder": write_gemma4_file(folder / "gemma4-tiny.safetensors"),
             "vae": write_conv_vae25(folder / "vae25.safetensors", DEMO_VAES["2.5"]),
             "audio_vae": write_audio_vae25(folder / "audio-vae25.safetensors"),
             "twin": folder / "ltx-2.5-tiny-twin.safetensors"}
    save_file(twin, str(paths["twin"]), metadata=transformer25_metadata(config))
    if text:
        paths["text_projection"] = folder / "ltx-2.5-connectors.safetensors"
        save_file(text, str(paths["text_projection"]))
    return paths


def _bundle_files(folder: Path, config, twin: dict, text: dict) -> dict[str, Path]:
    version = config.version.value
    others = other_components(config.version)
    sections = json.loads(checkpoint_metadata(config, None)["config"])
    paths = {"vae": folder / f"ltx-{version}-video-vae.safetensors",
             "audio_vae": folder / f"ltx-{version}-audio-vae.safetensors",
             "text_projection": folder / f"ltx-{version}-embeddings_connector.safetensors",
             "twin": folder / f"ltx-{version}-tiny-twin.safetensors"}
    parts = {"vae": (("vae.",), ("vae",)), "audio_vae": (("audio_vae.", "vocoder."), ("audio_vae", "vocoder"))}
    for field, (prefixes, names) in parts.items():
        save_file({k: v for k, v in others.items() if k.startswith(prefixes)}, str(paths[field]),
                  metadata={"config": json.dumps({name: sections[name] for name in names})})
    projection = {k: v for k, v in others.items() if k.startswith("text_embedding_projection.")}
    save_file(projection | text, str(paths["text_projection"]))
    bundle = {k: v for k, v in others.items() if not k.startswith(PREFIX)}
    save_file(twin | bundle, str(paths["twin"]), metadata=checkpoint_metadata(config, MODEL_VERSIONS[config.version]))
    return paths
