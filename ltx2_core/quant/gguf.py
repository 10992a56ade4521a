"""GGUF weights: a linear layer kept in its file's ggml block type (Q8_0, Q4_K, ...; `quant.gguf_types`) and
dequantised on its device, in torch ops, at each call; `GGUF_FORMAT` is its `WeightFormat`.

The weight stays the file's bytes (`GGUFLinear.weight`: uint8 (out, bytes per row)), so streaming and offloading
move the quantised bytes; the forward dequantises to the input's dtype without reading anything on the host (the
type and shape are Python values). Files come from `loader.gguf_file`. A LoRA rides beside the blocks and is added
after dequantisation at each call (`quant.low_rank`: the blocks are never requantised); tensor parallelism does not
cut GGUF layers (refused naming the safetensors checkpoint).
"""

from __future__ import annotations

from collections.abc import Collection

import torch
from torch import nn

from ltx2_core.errors import UnsupportedQuantizationError
from ltx2_core.loader.safetensors_file import SafetensorsFile
from ltx2_core.quant import low_rank
from ltx2_core.quant.gguf_types import GgmlType, dequantize


class GGUFLinear(nn.Module):
    """An `nn.Linear` whose (out, in) weight is `kind`-coded bytes, uint8 (out, kind.row_bytes(in)); the bias keeps
    its dtype (cast to the input's at each call)."""

    def __init__(self, in_features: int, out_features: int, kind: GgmlType, bias: bool = True, *,
                 device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        if in_features % kind.block_size:
            raise ValueError(f"a {kind.name} weight needs rows of whole {kind.block_size}-weight blocks; "
                             f"in_features={in_features}")
        self.in_features, self.out_features, self.kind = in_features, out_features, kind
        self.weight = nn.Parameter(torch.empty(out_features, kind.row_bytes(in_features), dtype=torch.uint8,
                                               device=device), requires_grad=False)
        bias_param = nn.Parameter(torch.empty(out_features, dtype=dtype, device=device), requires_grad=False)
        self.register_parameter("bias", bias_param if bias else None)
        low_rank.init_low_rank(self)

    @classmethod
    def like(cls, linear: nn.Linear, kind: GgmlType) -> GGUFLinear:
        """Empty, with `linear`'s shapes, device and bias dtype (e.g. on the meta model before loading)."""
        bias = linear.bias
        return cls(linear.in_features, linear.out_features, kind, bias is not None, device=linear.weight.device,
                   dtype=None if bias is None else bias.dtype)

    def dequantized(self, dtype: torch.dtype) -> torch.Tensor:
        """The (out, in) weight in `dtype`, computed on the weight's device."""
        return dequantize(self.weight, self.kind, (self.out_features, self.in_features), dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return low_rank.linear(self, x, self.dequantized(x.dtype), bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, type={self.kind.name}"


class GgufFormat:
    """ggml block types of GGUF files as a `WeightFormat` (see `quant.format`); its layers come from GGUF files
    only (`loader.gguf_file`), never from a safetensors header."""

    name, label, dtype, by_dtype, weight_only, lora_per_call = "gguf", "GGUF", "GGUF", False, False, True
    loads = "GGUF transformer files (F16, BF16, Q8_0, Q6_K, Q5_K, Q5_0/1, Q4_K, Q4_0/1, Q3_K, Q2_K)"
    scales: tuple[str, ...] = ()  # inside the blocks

    def rename(self, file: SafetensorsFile, keys: dict[str, str]) -> dict[str, str]:
        return keys

    def defaults(self, present: Collection[str]) -> dict[str, float]:
        return {}

    def layer(self, linear: nn.Linear, present: Collection[str], matmul: bool | None = None) -> GGUFLinear:
        raise UnsupportedQuantizationError("GGUF layers are built from a GGUF file's tensor types "
                                           "(ltx2_core.loader.gguf_file), not from a safetensors header")

    def owns(self, module: nn.Module) -> bool:
        return isinstance(module, GGUFLinear)

    def dequantize(self, module: nn.Module, dtype: torch.dtype) -> torch.Tensor:
        return module.dequantized(dtype)

    def weight_bytes(self, count: int) -> int:
        return count * 34 // 32  # Q8_0, the widest block type of the quantised files (F16 layers stay plain)

    def shard_scales(self, module: nn.Module) -> dict[str, torch.Tensor | None]:
        raise UnsupportedQuantizationError("GGUF layers are not split for tensor parallelism; run a GGUF file on "
                                           "one GPU, or use the bf16/fp8 safetensors checkpoint with parallel GPUs")

    def fuse_(self, module: nn.Module, weight: torch.Tensor) -> None:
        raise UnsupportedQuantizationError("GGUF blocks are not requantised: a LoRA rides beside a GGUF layer and is "
                                           "added per call (loader.lora attaches it, quant.low_rank)")


GGUF_FORMAT = GgufFormat()
