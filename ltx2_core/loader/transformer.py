"""Build a model on the `meta` device and fill it from a checkpoint with `assign=True` (no double allocation)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

import torch

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.loader.checkpoint import check_tensors, transformer_config, transformer_keys
from ltx2_core.quant.files import apply_fp8_plan, fp8_plan, unscaled_state
from ltx2_core.loader.layouts import transformer_layout
from ltx2_core.loader.lora import Lora, check_lora, fuse_loras, load_lora, shard_lora
from ltx2_core.loader.safetensors_file import Shard, read_header, read_tensors
from ltx2_core.loader.sources import Component, Source, component_source
from ltx2_core.quant.fp8 import dequantize_model, quantize_blocks
from ltx2_core.model.transformer import LTX2Transformer

FP8_MODES = ("auto", "quantize", "dequantize")


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
    `fp8` (see FP8_MODES): "auto" keeps an fp8 file's weights in fp8 (`FP8Linear`, see `loader.fp8_files` for the
    layouts) and a bf16 file's in `dtype`; "quantize" also quantises a bf16 file's block linears to fp8 (half the
    weight memory); "dequantize" turns an fp8 file's weights into `dtype` (default bf16).
    """
    if fp8 not in FP8_MODES:
        raise ValueError(f"fp8 must be one of {', '.join(FP8_MODES)}, got {fp8!r}")
    source = component_source(path, Component.TRANSFORMER)
    file = read_header(source.path)
    layout = transformer_layout(file, source.prefix)
    config = config or transformer_config(file)
    with torch.device("meta"):
        model = LTX2Transformer(config)
    plan = fp8_plan(file, transformer_keys(file.tensors, layout.prefix))
    if parallelize is not None and fp8 == "quantize":
        raise ValueError(f"{file.path}: fp8='quantize' does not combine with tensor parallelism; load the official "
                         "fp8 file instead (its shards stay fp8), or leave fp8 at auto")
    keys, expected = plan.keys, apply_fp8_plan(model, plan, file.path)
    check_tensors(file, keys, expected, component="transformer")
    loras = [(lora if isinstance(lora, Lora) else load_lora(lora), strength) for lora, strength in loras]
    for lora, _ in loras:
        check_lora(model, lora)
    shards = parallelize(model) if parallelize is not None else {}
    state = read_tensors(file, keys, device=device, dtype=dtype, shards=shards, keep=plan.kept)
    state |= unscaled_state(plan, device)
    model.load_state_dict(state, strict=True, assign=True)
    if fp8 == "dequantize":
        dequantize_model(model, dtype or torch.bfloat16)
    elif fp8 == "quantize":
        quantize_blocks(model)
    fuse_loras(model, [(shard_lora(lora, shards), strength) for lora, strength in loras])
    return model.eval()
