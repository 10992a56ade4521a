"""A memory plan made before any weight moves: how much of the transformer stays on the device, how many guidance
passes share a forward, and whether LTX-2.0's text keys and values are kept for the run.

Inputs: the device's free memory, the transformer's weight bytes (per dtype, fp8 linears at one byte, per rank
under tensor parallelism: `transformer_weight_bytes` counts them on a meta model), and an estimate of one forward's
activations at the requested size and batch of passes (`activation_bytes`). The plan prefers, in order: every block
resident with LTX-2.0's text K/V cache; every block resident without it (the cache saves ~2 % of a step's work,
streaming costs bandwidth); all passes in one forward with the blocks that do not fit streamed (one streamed copy of
the weights serves every pass of a step, so streaming costs the least there); fewer passes per forward. When nothing
fits it raises MemoryPlanError naming the smallest change that would.

The activation figure is an estimate from the block's structure: the largest set of tensors alive at once inside
a block (the residual stream, the modulated input, q, k, v, the attention output, the 4x feed-forward hidden state
and its activation) for the video and audio tokens of the batch, the text side (projected contexts, a block's text
keys and values), plus the RoPE tables. `bench/memory_plan.py` compares it with fake-tensor accounting of a full
forward (it stays above it, by 10-40 %), and a test does at a small size.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ltx2_core.config import TransformerConfig
from ltx2_core.errors import LTX2Error
from ltx2_core.latents import audio_latent_length
from ltx2_core.model.fp8 import BLOCK_LINEARS

GB = 1e9
HEADROOM = 0.92  # of the free memory the plan may use (the allocator's fragmentation, CUDA's own buffers)
TEXT_TOKENS = 1024  # the connectors' output length of the releases
# tensors of width D alive at once inside a block, per token of the batch (the residual, the modulated input, q, k,
# v, the attention output, the feed-forward's 4·D hidden state and its GELU): fake-tensor accounting of the released
# models at 768x512x121 measures 2.3 GB for 2.3 with 4 passes, which this puts at 2.8 GB (bench/memory_plan.py)
LIVE_WIDTHS = 12
# the text side, per text token of the batch and width: the projected contexts kept for the run, the caption
# projection's intermediates, a block's text keys and values (dominant at small sizes: 1,024 text tokens)
TEXT_WIDTHS = 8


def size(count: int) -> str:
    """Bytes for people: 23.4 GB, 512.0 MB, 3.1 KB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


class MemoryPlanError(LTX2Error, ValueError):
    """The request cannot fit the device; the message names the smallest change that would make it fit."""


class WeightBytes(NamedTuple):
    non_block: int
    per_block: int
    blocks: int

    @property
    def total(self) -> int:
        return self.non_block + self.per_block * self.blocks


def transformer_weight_bytes(config: TransformerConfig, dtype: torch.dtype = torch.bfloat16, fp8: bool = False,
                             tp: int = 1) -> WeightBytes:
    """Weight bytes of the transformer in `dtype`, its block linears in fp8 (one byte, plus a 4-byte scale) when
    `fp8`, the blocks' matrices divided over `tp` ranks (their vectors and the non-block weights replicated)."""
    from ltx2_core.model.transformer import LTX2Transformer

    with torch.device("meta"):
        model = LTX2Transformer(config)
    size = torch.finfo(dtype).bits // 8

    def bytes_of(prefix: str, module: torch.nn.Module) -> int:
        total = 0
        for name, param in module.named_parameters():
            full = f"{prefix}{name}"
            quantised = fp8 and full.endswith(".weight") and full[: -len(".weight")].endswith(BLOCK_LINEARS)
            per = 1 if quantised else size
            shard = tp if param.dim() == 2 and tp > 1 else 1
            total += param.numel() * per // shard + (4 if quantised else 0)
        return total

    block = bytes_of("transformer_blocks.0.", model.transformer_blocks[0])
    non_block = sum(bytes_of(name + ".", m) for name, m in model.named_children() if name != "transformer_blocks")
    non_block += sum(p.numel() * size for p in model.parameters(recurse=False))
    return WeightBytes(non_block, block, config.num_layers)


def tokens(frames: int, height: int, width: int, fps: float = 24.0) -> tuple[int, int]:
    """(video tokens, audio tokens) of a clip."""
    return ((frames - 1) // 8 + 1) * (height // 32) * (width // 32), audio_latent_length(frames, fps)


def activation_bytes(config: TransformerConfig, frames: int, height: int, width: int, batch: int,
                     dtype: torch.dtype = torch.bfloat16, fps: float = 24.0) -> int:
    """The estimated peak of one forward's activations for `batch` passes (see the module docstring)."""
    size = torch.finfo(dtype).bits // 8
    video, audio = tokens(frames, height, width, fps)
    live = batch * (video * config.video.width + audio * config.audio.width) * LIVE_WIDTHS * size
    text = batch * TEXT_TOKENS * (config.video.width + config.audio.width) * TEXT_WIDTHS * size
    rope = 2 * 2 * (video * config.video.width + audio * config.audio.width) * 4  # cos/sin tables, self and cross
    return live + text + rope


def text_kv_bytes(config: TransformerConfig, batch: int, dtype: torch.dtype = torch.bfloat16) -> int:
    """LTX-2.0's per-run text K/V cache (2.3 has none): keys and values of every block for the batch."""
    if config.cross_attention_adaln:
        return 0
    size = torch.finfo(dtype).bits // 8
    return config.num_layers * 2 * batch * TEXT_TOKENS * (config.video.width + config.audio.width) * size


# peak activations of one decoded tile with the video kept on the host (bench/video_decode.py, released decoders,
# bf16): 0.77 GiB at 512 px tiles; it scales with the tile's area
TILE_BYTES_512 = int(0.77 * 2**30)
TILE_SIZES = (512, 384, 256)


def decode_tile_bytes(tile: int, at_512: int = TILE_BYTES_512) -> int:
    return at_512 * tile * tile // (512 * 512)


class MemoryPlan(NamedTuple):
    resident_blocks: int
    streamed_blocks: int
    passes_per_forward: int
    cache_text_kv: bool
    weights: WeightBytes
    activations: int
    text_kv: int
    free: int
    decode_tile: int = 512  # px of the spatial decode tiles (the reference's 512 unless memory is short)
    decoders: int = 0  # the VAE and vocoder weight bytes that share the device
    tile_bytes_512: int = 0  # a 512 px tile's decoding activations (0: not planned, e.g. the tiny demo decoder)

    def tiling(self):
        """The decoder's TilingConfig for `decode_tile` (overlap scaled with the tile)."""
        from ltx2_core.model.video_vae.tiling import TilingConfig

        return TilingConfig(spatial_tile=self.decode_tile, spatial_overlap=self.decode_tile // 8)

    @property
    def device_weights(self) -> int:
        slots = 2 * self.weights.per_block if self.streamed_blocks else 0
        return self.weights.non_block + self.resident_blocks * self.weights.per_block + slots

    @property
    def peak(self) -> int:
        sampling = self.activations + (self.text_kv if self.cache_text_kv else 0)
        decoding = decode_tile_bytes(self.decode_tile, self.tile_bytes_512)
        return self.device_weights + self.decoders + max(sampling, decoding)

    def describe(self) -> str:
        w = self.weights
        streamed = (f", {self.streamed_blocks} streamed through 2 slots ({size(2 * w.per_block)})"
                    if self.streamed_blocks else "")
        kv = f" + text K/V {size(self.text_kv)}" if self.cache_text_kv and self.text_kv else ""
        return (f"memory plan: {self.resident_blocks}/{w.blocks} blocks resident "
                f"({size(w.non_block + self.resident_blocks * w.per_block)} with the non-block weights){streamed} + "
                f"activations {size(self.activations)} ({self.passes_per_forward} passes per forward){kv}; decoding "
                f"in {self.decode_tile} px tiles; peak {size(self.peak)} of {size(self.free)} free")


def plan_memory(config: TransformerConfig, weights: WeightBytes, free: int, frames: int, height: int, width: int,
                passes: int, *, fps: float = 24.0, dtype: torch.dtype = torch.bfloat16,
                fp8_available: bool = False, decoders: int = 0, tile_bytes_512: int = 0) -> MemoryPlan:
    """The plan for a request (see the module docstring); MemoryPlanError with the smallest change when none fits.
    `fp8_available`: whether the weights are bf16 and could be quantised (suggested when it would fit); `decoders`:
    the VAE and vocoder bytes on the same device; `tile_bytes_512`: a 512 px decode tile's activations
    (TILE_BYTES_512 for the released decoders; 0 leaves decoding out), the largest tile that fits is chosen."""
    plan = _sampling_plan(config, weights, int(free - decoders / HEADROOM), frames, height, width, passes, fps,
                          dtype, fp8_available)
    plan = plan._replace(free=free, decoders=decoders, tile_bytes_512=tile_bytes_512)
    room = int(free * HEADROOM) - plan.device_weights - decoders
    tile = next((t for t in TILE_SIZES if decode_tile_bytes(t, tile_bytes_512) <= room), None)
    if tile is None:
        smallest = decode_tile_bytes(TILE_SIZES[-1], tile_bytes_512)
        raise MemoryPlanError(f"after sampling, {size(max(room, 0))} is left for decoding next to the weights, less "
                              f"than the smallest decode tile needs ({size(smallest)}); free memory on the device "
                              "or use fp8 weights")
    return plan._replace(decode_tile=tile)


def _sampling_plan(config, weights, free, frames, height, width, passes, fps, dtype, fp8_available) -> MemoryPlan:
    budget = int(free * HEADROOM)
    kv = text_kv_bytes(config, passes, dtype)
    for batch in sorted({passes, *(b for b in (2, 1) if b < passes)}, reverse=True):
        activations = activation_bytes(config, frames, height, width, batch, dtype, fps)
        for cache in ((True, False) if kv else (False,)):  # the cache is cheaper to drop than blocks to stream
            if budget - weights.non_block - activations - (kv if cache else 0) >= weights.per_block * weights.blocks:
                return MemoryPlan(weights.blocks, 0, batch, cache, weights, activations, kv, free)
        resident = (budget - weights.non_block - activations - 2 * weights.per_block) // weights.per_block
        if resident >= 0:
            return MemoryPlan(min(resident, weights.blocks - 1), weights.blocks - min(resident, weights.blocks - 1),
                              batch, False, weights, activations, kv, free)
    raise MemoryPlanError(_smallest_change(config, weights, free, frames, height, width, fps, dtype, fp8_available))


def decoder_bytes(path) -> int:
    """The video and audio VAE decoders' and the vocoder's bytes in a checkpoint (header only)."""
    from ltx2_core.loader import read_header

    prefixes = ("vae.decoder.", "vae.per_channel_statistics.", "audio_vae.", "vocoder.")
    return sum(_entry_bytes(e) for name, e in read_header(path).tensors.items() if name.startswith(prefixes))


def _entry_bytes(entry) -> int:
    from ltx2_core.loader.safetensors_file import DTYPE_BYTES

    count = 1
    for dim in entry.shape:
        count *= dim
    return count * DTYPE_BYTES[entry.dtype]


def _smallest_change(config, weights, free, frames, height, width, fps, dtype, fp8_available) -> str:
    need = weights.non_block + 2 * weights.per_block + activation_bytes(config, frames, height, width, 1, dtype, fps)
    message = (f"{width}x{height}x{frames} does not fit {size(free)} free even with every block streamed and one "
               f"pass per forward: it needs about {size(need)}")
    if fp8_available:
        fp8 = transformer_weight_bytes(config, dtype, fp8=True)
        if fp8.non_block + 2 * fp8.per_block + need - weights.non_block - 2 * weights.per_block <= free * HEADROOM:
            return message + "; quantise the weights to fp8 (fp8 = quantize, --fp8 quantize) to halve them"
    for scale in (0.75, 0.5, 0.25):
        w, h = max(32, int(width * scale) // 32 * 32), max(32, int(height * scale) // 32 * 32)
        smaller = weights.non_block + 2 * weights.per_block + activation_bytes(config, frames, h, w, 1, dtype, fps)
        if smaller <= free * HEADROOM:
            return message + f"; {w}x{h} fits (or fewer frames)"
    return message + "; use a GPU with more memory, or spread the model over several with tensor parallelism"


def apply_memory_plan(model: torch.nn.Module, plan: MemoryPlan, device: torch.device | str):
    """The plan on a loaded transformer: its streamed blocks streamed to `device` (the rest moved there) and the
    text K/V cache as planned; returns the BlockStreamer (None when every block is resident). The sampler takes
    `plan.passes_per_forward`."""
    from ltx2_core.model.streaming import stream_blocks

    model.cache_text_kv = plan.cache_text_kv
    if plan.streamed_blocks:
        return stream_blocks(model, device, resident=plan.resident_blocks)
    model.to(device)
    return None
