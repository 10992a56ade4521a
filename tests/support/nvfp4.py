"""An NVFP4 packer for tests (round to nearest), in the layout `ltx2_core.quant.nvfp4` reads: E2M1 pairs high
nibble first, e4m3 block scales per 16 values in cuBLAS's blocked layout, an fp32 tensor scale."""

from __future__ import annotations

import torch

from ltx2_core.quant.nvfp4 import BLOCK, E2M1, blocked_index, packed_shapes


def quantize_nvfp4(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(packed uint8 weight, blocked e4m3 block scales, 0-d fp32 tensor scale) of an (out, in) matrix."""
    out_features, in_features = weight.shape
    (rows, half), scale_shape = packed_shapes(out_features, in_features)
    padded = torch.zeros(rows, half * 2)
    padded[:out_features, :in_features] = weight.float()
    blocks = padded.reshape(rows, -1, BLOCK)
    amax = blocks.abs().amax(-1)
    tensor_scale = (amax.max() / (6 * 448)).clamp(min=1e-12)
    block_scales = (amax / 6 / tensor_scale).clamp(max=448).to(torch.float8_e4m3fn)
    scale = block_scales.float() * tensor_scale
    scaled = torch.where(scale[..., None] > 0, blocks / scale[..., None].clamp(min=1e-30), 0.0).reshape(rows, -1)
    codes = (scaled[..., None] - torch.tensor(E2M1)).abs().argmin(-1).to(torch.uint8)  # nearest E2M1 value
    packed = (codes[:, 0::2] << 4) | codes[:, 1::2]
    blocked = torch.zeros(scale_shape, dtype=torch.float8_e4m3fn).reshape(-1)
    blocked[blocked_index(rows, half * 2 // BLOCK).reshape(-1)] = block_scales.reshape(-1)
    return packed, blocked.reshape(scale_shape), tensor_scale
