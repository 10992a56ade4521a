"""LTX-2 transformers in GGUF files (the layout of ComfyUI-GGUF's conversions, `docs/small_cards/gguf.md`), read
with the `gguf` package's `GGUFReader` and loaded with their block-type linears kept quantised (`quant.gguf`).

Layout: `general.architecture` "ltxv" (or none); the DiT's tensors under the official names with or without
`model.diffusion_model.` (the text connectors, when present, belong to the text path: `gguf_header` and
`read_gguf_tensors` serve its loader, dequantised); shapes in ggml order (the
torch shape reversed) unless a `comfy.gguf.orig_shape.<name>` field gives the torch shape; 1-D tensors and the
AdaLN tables in F32. The config comes from a `config` field (the safetensors metadata's JSON) when the file has
one, else from the shapes, the release told by the key set. Everything is checked before any model is built.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import NamedTuple

import torch

from ltx2_core.errors import CheckpointError, ConfigError, KeyMismatchError
from ltx2_core.loader.checkpoint import check_tensors, transformer_keys
from ltx2_core.loader.gguf_reader import GgufFile, read_gguf
from ltx2_core.loader.safetensors_file import SafetensorsFile, TensorEntry
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.model.transformer.config import VIDEO_DEFAULTS, StreamConfig, TransformerConfig
from ltx2_core.quant.gguf import GGUFLinear
from ltx2_core.quant.gguf_types import dequantize
from ltx2_core.releases import RELEASES, ModelVersion

PREFIX = "model.diffusion_model."
ARCHITECTURES = ("ltxv", None)  # ComfyUI-GGUF's name for LTX video models; none in sd.cpp-style files
_TEXT_ARCHITECTURES = ("llama", "gemma", "gemma2", "gemma3", "gemma4", "t5", "t5encoder", "qwen2", "qwen2vl", "qwen3")
_TEXT_KEYS = ("token_embd.weight", "blk.0.", "model.embed_tokens.weight", "encoder.block.0.")
# a bundle's other components, when a conversion kept them beside the bare DiT names: not the transformer's
_BESIDE_DIT = ("text_embedding_projection.", "vae.", "audio_vae.", "vocoder.")
_NUMBER = re.compile(r"\.\d+\.")
FIX = "use an LTX-2 transformer GGUF (e.g. a ComfyUI-GGUF conversion of ltx-2.3-22b-dev) or the safetensors checkpoint"


def transformer_tensors(file: GgufFile) -> dict[str, str]:
    """Model key -> file key of the DiT tensors; CheckpointError naming what the file is when it is not an LTX-2
    transformer (another model family, a text encoder)."""
    names = list(file.tensors)
    arch = file.architecture
    if arch in _TEXT_ARCHITECTURES or any(n.startswith(_TEXT_KEYS) for n in names):
        raise CheckpointError(f"{file.path}: a text encoder GGUF (architecture {arch!r}), where the transformer "
                              "goes; give the transformer GGUF as the checkpoint and the Gemma text encoder "
                              "(safetensors) as the text encoder")
    if arch not in ARCHITECTURES:
        raise CheckpointError(f"{file.path}: a GGUF of another model family (architecture {arch!r}); {FIX}")
    prefix = PREFIX if any(n.startswith(PREFIX) for n in names) else ""
    keys = {k: v for k, v in transformer_keys(names, prefix).items() if not k.startswith(_BESIDE_DIT)}
    if not any(k.startswith("transformer_blocks.") and ".audio_attn1." in k for k in keys):
        raise CheckpointError(f"{file.path}: a GGUF of another model family (no LTX-2 audio-video transformer "
                              f"blocks, e.g. {', '.join(names[:3])}); {FIX}")
    return keys


def gguf_config(file: GgufFile, keys: dict[str, str]) -> TransformerConfig:
    """The config from the file's `config` field when present, else from the shapes (see the module docstring)."""
    raw = file.fields.get("config")
    if raw is not None:
        try:
            return TransformerConfig.from_metadata(json.loads(raw)["transformer"], file.fields.get("model_version"))
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{file.path}: the 'config' field does not describe an LTX-2 transformer ({exc}); "
                              f"{FIX}") from exc
    version = _release(file, keys)
    release = RELEASES[version]
    shape = {k: file.tensors[v].shape for k, v in keys.items()}
    video_width = shape["transformer_blocks.0.attn1.to_q.weight"][0]
    audio_width = shape["transformer_blocks.0.audio_attn1.to_q.weight"][0]
    gate = shape.get("transformer_blocks.0.attn1.to_gate_logits.weight")
    heads = gate[0] if gate is not None else VIDEO_DEFAULTS.heads  # without gates the shapes do not tell the heads
    caption = shape.get("caption_projection.linear_1.weight")
    stream = {}
    for name, width, pre in (("video", video_width, ""), ("audio", audio_width, "audio_")):
        if width % heads:
            raise ConfigError(f"{file.path}: width {width} of the {name} stream is not a multiple of {heads} heads; "
                              f"add the 'config' field or {FIX}")
        stream[name] = StreamConfig(heads=heads, head_dim=width // heads, context_dim=width,
                                    in_channels=shape[f"{pre}patchify_proj.weight"][1],
                                    out_channels=shape[f"{pre}proj_out.weight"][0],
                                    max_pos=VIDEO_DEFAULTS.max_pos if name == "video" else (20,))
    blocks = {int(k.split(".")[1]) for k in keys if k.startswith("transformer_blocks.")}
    config = TransformerConfig(
        version=version, video=stream["video"], audio=stream["audio"], num_layers=len(blocks),
        caption_channels=None if caption is None else caption[1], gated_attention=release.gated_attention,
        cross_attention_adaln=release.cross_attention_adaln, ff_bias=release.ff_bias[0],
        audio_ff_bias=release.ff_bias[1], prompt_adaln=release.prompt_adaln,
        own_timestep_cross_modulation=release.own_timestep_cross_modulation)
    config.validate()
    return config


def _release(file: GgufFile, keys: dict[str, str]) -> ModelVersion:
    """The release whose DiT has exactly this key set (block numbers aside)."""
    found = {_NUMBER.sub(".N.", k) for k in keys}
    for version in ModelVersion:
        with torch.device("meta"):
            names = LTX2Transformer(TransformerConfig.tiny(version, num_layers=1)).state_dict()
        if {_NUMBER.sub(".N.", k) for k in names} == found:
            return version
    raise KeyMismatchError(f"{file.path}: its tensor names match no LTX-2 release (2.0, 2.3, 2.5); the file is "
                           f"incomplete or of another variant; {FIX}")


def gguf_transformer_config(path: str | os.PathLike) -> TransformerConfig:
    """The DiT config of a GGUF transformer file, every check of `load_gguf_transformer` but the shapes done (no
    tensor read)."""
    file = read_gguf(path)
    return gguf_config(file, transformer_tensors(file))


def load_gguf_transformer(path: str | os.PathLike, config: TransformerConfig | None = None, *,
                          device: torch.device | str = "cpu", dtype: torch.dtype | None = None) -> LTX2Transformer:
    """The DiT of a GGUF file: linears stored in a block type become `GGUFLinear`s (kept quantised on `device`),
    the other tensors are dequantised into `dtype` (default bf16), as is the compute of the quantised ones."""
    file = read_gguf(path)
    keys = transformer_tensors(file)
    config = config or gguf_config(file, keys)
    with torch.device("meta"):
        model = LTX2Transformer(config)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    shapes = {k: file.tensors[v].shape for k, v in keys.items()}
    check_tensors(_Shapes(file.path, {keys[k]: _Entry(s) for k, s in shapes.items()}), keys, expected,
                  component="transformer")
    linears = {name: m for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    state = {}
    for key, file_key in keys.items():
        tensor = file.tensors[file_key]
        data = torch.from_numpy(tensor.data.copy()).to(device)
        module = key.rsplit(".", 1)[0]
        if tensor.kind.quantised and key.endswith(".weight") and module in linears:
            layer = GGUFLinear.like(linears[module], tensor.kind)
            parent, _, child = module.rpartition(".")
            setattr(model.get_submodule(parent) if parent else model, child, layer)
            state[key] = data.view(tensor.shape[0], -1)
        else:
            state[key] = dequantize(data, tensor.kind, tensor.shape, dtype or torch.bfloat16)
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval()


def gguf_header(path: str | os.PathLike) -> SafetensorsFile:
    """A GGUF file's table as a safetensors header: its string fields as the metadata (a `config` field as the
    safetensors JSON), each tensor's ggml type name as its dtype and its torch shape; for the loaders that check
    keys and shapes before reading (the text path)."""
    file = read_gguf(path)
    metadata = {k: v for k, v in file.fields.items() if isinstance(v, str)}
    return SafetensorsFile(file.path, metadata, {n: TensorEntry(t.kind.name, t.shape) for n, t in file.tensors.items()})


def read_gguf_tensors(path: str | os.PathLike, names: dict[str, str], *, device: torch.device | str = "cpu",
                      dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """The tensors `names` (model key -> file key) dequantised into `dtype` (default bf16, as the GGUF DiT's), on
    `device`: for the small parts that run dequantised (the text connectors)."""
    file = read_gguf(path)
    out = {}
    for key, file_key in names.items():
        tensor = file.tensors[file_key]
        data = torch.from_numpy(tensor.data.copy()).to(device)
        out[key] = dequantize(data, tensor.kind, tensor.shape, dtype or torch.bfloat16)
    return out


class _Entry(NamedTuple):
    shape: tuple[int, ...]


class _Shapes(NamedTuple):
    """What `check_tensors` reads of a file: its path and each tensor's shape."""

    path: Path
    tensors: dict[str, _Entry]
