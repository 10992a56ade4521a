"""Build a model on the `meta` device and fill it from a checkpoint with `assign=True` (no double allocation)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

import torch

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.loader.gguf_file import gguf_transformer_config, load_gguf_transformer
from ltx2_core.loader.gguf_reader import is_gguf
from ltx2_core.loader.checkpoint import check_tensors, transformer_config, transformer_keys
from ltx2_core.loader.layouts import transformer_layout
from ltx2_core.loader.lora import Lora, check_lora, fuse_loras, load_lora, shard_lora
from ltx2_core.loader.safetensors_file import Shard, read_header, read_tensors
from ltx2_core.loader.sources import Component, Source, component_source
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.quant.files import default_scales, install_layers, read_formats
from ltx2_core.quant.policy import apply_mode, check_mode, check_sharded


def load_transformer(
    path: str | os.PathLike | Source,
    config: TransformerConfig | None = None,
    *,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
    loras: Sequence[tuple[str | os.PathLike | Lora, float]] = (),
    parallelize: Callable[[LTX2Transformer], Mapping[str, Shard]] | None = None,
    fp8: str = "auto",
) -> LTX2Transformer:
    """The DiT of an LTX-2 file (`path`: a bundled checkpoint's path or a `Source`); `config` overrides the file's
    metadata.

    Everything about the file is checked before any tensor is read: format, header, layout, config, key set and
    shapes. A transformer-only file with the official names under another prefix loads too (see `layouts`).
    Only the DiT's own tensors are read; `dtype` (e.g. torch.bfloat16) casts floating tensors while loading.
    `loras` ((file or Lora, strength) pairs) are checked against the model before loading and fused after.
    `parallelize` (e.g. `ltx2_core.parallel.tensor_parallel` with a group) runs on the meta model once it is
    checked; this rank then reads only its shard of each parameter it names, and the LoRAs are fused into the shards.
    `fp8` (see `quant.policy.FP8_MODES`): "auto" keeps a quantised file's weights in their format (e.g.
    `FP8Linear`, see `quant.files` for the layouts) and a bf16 file's in `dtype`; "quantize" also quantises a bf16
    file's block linears to fp8 (half the weight memory); "dequantize" turns a quantised file's weights into
    `dtype` (default bf16).
    A `.gguf` path loads through `loader.gguf_file` (its block-type linears kept quantised, `loras` attached beside
    them and added per call: `quant.low_rank`).
    """
    check_mode(fp8)
    file_path = path.path if isinstance(path, Source) else path
    if is_gguf(file_path):
        if parallelize is not None or fp8 != "auto":
            raise ValueError(f"{path}: a GGUF transformer loads without tensor parallelism or an fp8 mode; use the "
                             "safetensors checkpoint for those")
        return _load_gguf(file_path, config, device, dtype, loras)
    source = component_source(path, Component.TRANSFORMER)
    file = read_header(source.path)
    layout = transformer_layout(file, source.prefix)
    config = config or transformer_config(file)
    with torch.device("meta"):
        model = LTX2Transformer(config)
    stored = read_formats(file, transformer_keys(file.tensors, layout.prefix))
    if parallelize is not None:
        check_sharded(fp8, file.path)
    keys, expected = stored.keys, install_layers(model, stored, file.path)
    check_tensors(file, keys, expected, component="transformer")
    loras = [(lora if isinstance(lora, Lora) else load_lora(lora), strength) for lora, strength in loras]
    for lora, _ in loras:
        check_lora(model, lora)
    shards = parallelize(model) if parallelize is not None else {}
    state = read_tensors(file, keys, device=device, dtype=dtype, shards=shards, keep=stored.kept)
    state |= default_scales(stored, device)
    model.load_state_dict(state, strict=True, assign=True)
    apply_mode(model, fp8, dtype)
    fuse_loras(model, [(shard_lora(lora, shards), strength) for lora, strength in loras])
    return model.eval()


def _load_gguf(path: str | os.PathLike, config: TransformerConfig | None, device: torch.device | str,
               dtype: torch.dtype | None, loras: Sequence[tuple[str | os.PathLike | Lora, float]]) -> LTX2Transformer:
    """A GGUF transformer; its LoRAs checked against the meta model of the file's config before any weight is read,
    then attached beside the quantised layers (`quant.low_rank`)."""
    loras = [(lora if isinstance(lora, Lora) else load_lora(lora), strength) for lora, strength in loras]
    if loras:
        config = config or gguf_transformer_config(path)
        with torch.device("meta"):
            meta = LTX2Transformer(config)
        for lora, _ in loras:
            check_lora(meta, lora)
    model = load_gguf_transformer(path, config, device=device, dtype=dtype)
    fuse_loras(model, loras)
    return model
