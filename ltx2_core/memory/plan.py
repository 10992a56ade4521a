"""A memory plan made before any weight moves: how much of the transformer stays on the device, how many guidance
passes share a forward, whether the text keys and values are kept for the run, and how the streamed weights
are held in host memory.

Device: the free memory (or the user's budget) holds, through the whole run, the transformer's weights as planned
and the decoders; on top of them each stage holds its own working set: sampling its activations (and the text K/V
cache), decoding one tile, and the stages whose modules visit the device only while they run (`memory.offload`):
encoding the prompt (Gemma's embeddings and norms, two streamed layers, the text projection and connectors, the
hidden states), encoding the images (the video encoder) and upsampling (the upsampler). The peak is the weights plus
the largest stage. The transformer's weight bytes are each format's own (a file's layers as the loader builds them:
GGUF block types, int8 / MXFP8 / fp8 with their scales; `memory.weight_layout`), per rank under tensor
parallelism (`transformer_weight_bytes` counts them on a meta model); one forward's activations at the requested
size and batch of passes are estimated (`activation_bytes`). The plan prefers, in order: every block resident with
the text K/V cache of 2.0 and 2.5; every block resident without it (the cache saves ~2 % of a step's work,
streaming costs bandwidth), with the passes per forward the device's measured policy picks (`memory.pass_policy`:
all in one, or one at a time where batching loses); all passes in one forward with the blocks that do not fit
streamed (one streamed copy of the weights serves every pass of a step, so streaming costs the least there); fewer
passes per forward.

Host: the streamed blocks and Gemma's layers are pinned (fastest copies, but RAM the system cannot swap) when they
fit the available RAM beside the modules waiting for their visits; else, when the weights keep their files' dtype,
they are read from the memory-mapped files (pages the system can drop and read again); else the run is refused.

When nothing fits, MemoryPlanError states the budget, what was set aside and what the run needs, and names the
smallest change that would fit.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.errors import LTX2Error
from ltx2_core.geometry import floor_size, video_tokens
from ltx2_core.memory.estimates import (
    GB,
    TILE_BYTES_512,
    TILE_SIZES,
    WeightBytes,
    activation_bytes,
    decode_tile_bytes,
    decoder_bytes,
    duration_head_bytes,
    size,
    text_kv_bytes,
    transformer_weight_bytes,
)
from ltx2_core.memory.pass_policy import policy_passes
from ltx2_core.memory.sizes import SideBytes

HEADROOM = 0.92  # of the free memory the plan may use (the allocator's fragmentation, CUDA's own buffers)
HOST_HEADROOM = 0.85  # of the available RAM (the process itself, the system's page cache, ComfyUI's other models)


class MemoryPlanError(LTX2Error, ValueError):
    """The request cannot fit the device; the message names the smallest change that would make it fit."""



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
    side: SideBytes = SideBytes()  # the modules that visit the device for their stage, and Gemma's layers
    ram: int | None = None  # the RAM available (None: host memory not planned, e.g. on the CPU)
    pin: bool = True  # streamed blocks in pinned host memory; False: read from the memory-mapped files
    source: str = "free"  # what `free` is: the device's free memory, or the user's "budget"
    decode_base: int = 0  # what decoding holds besides its tiles (the diffusion decoder's video-sized tensors)

    def tiling(self):
        """The decoder's TilingConfig for `decode_tile` (overlap scaled with the tile: an eighth, in whole 32 px)."""
        from ltx2_core.model.video_vae.tiling import TilingConfig

        return TilingConfig(spatial_tile=self.decode_tile, spatial_overlap=max(32, self.decode_tile // 8 // 32 * 32))

    @property
    def device_weights(self) -> int:
        slots = self.weights.slots if self.streamed_blocks else 0
        return self.weights.non_block + self.resident_blocks * self.weights.per_block + slots

    def stages(self) -> dict[str, int]:
        """What each stage adds on the device to the transformer's weights and the decoders: its activations and
        the modules that visit for it."""
        return {"sampling": self.activations + (self.text_kv if self.cache_text_kv else 0),
                "decoding": self.decode_base + decode_tile_bytes(self.decode_tile, self.tile_bytes_512),
                "encoding the prompt": self.side.encoding, "encoding the images": self.side.conditioning,
                "upsampling": self.side.upsampling}

    @property
    def peak(self) -> int:
        return self.device_weights + self.decoders + max(self.stages().values())

    @property
    def host_streamed(self) -> int:
        """The streamed transformer blocks and Gemma's layers in host memory."""
        return self.streamed_blocks * self.weights.per_block + self.side.gemma_layers

    def describe(self) -> str:
        w = self.weights
        streamed = (f", {self.streamed_blocks} streamed through 2 slots ({size(w.slots)})"
                    if self.streamed_blocks else "")
        kv = f" + text K/V {size(self.text_kv)}" if self.cache_text_kv and self.text_kv else ""
        decoders = f" + decoders {size(self.decoders)}" if self.decoders else ""
        visits = [f"{name} {size(b)}" for name, b in list(self.stages().items())[2:] if b]
        visiting = f"; visiting: {', '.join(visits)}" if visits else ""
        line = (f"memory plan: {self.resident_blocks}/{w.blocks} blocks resident "
                f"({size(w.non_block + self.resident_blocks * w.per_block)} with the non-block weights){streamed} + "
                f"activations {size(self.activations)} ({self.passes_per_forward} passes per forward){kv}{decoders}"
                f"{visiting}; decoding in {self.decode_tile} px tiles ({size(self.stages()['decoding'])}); peak "
                f"{size(self.peak)} of {size(self.free)} "
                f"{self.source}")
        if self.ram is None:
            return line
        held = (f"{size(self.host_streamed)} pinned" if self.pin
                else f"{size(self.host_streamed)} read from the memory-mapped files")
        return line + f"; host: {held} + {size(self.side.visitors)} of {size(self.ram)} RAM available"


def plan_memory(config: TransformerConfig, weights: WeightBytes, free: int, frames: int, height: int, width: int,
                passes: int, *, fps: float = 24.0, dtype: torch.dtype = torch.bfloat16,
                fp8_available: bool = False, decoders: int = 0, tile_bytes_512: int = 0,
                side: SideBytes = SideBytes(), ram: int | None = None, mappable: bool = False,
                stream_all: bool = False, source: str = "free", decode_base: int = 0, sp: int = 1,
                capability: tuple[int, int] | None = None) -> MemoryPlan:
    """The plan for a request (see the module docstring); MemoryPlanError with the smallest change when none fits.
    `fp8_available`: whether the weights are bf16 and could be quantised (suggested when it would fit); `decoders`:
    the VAE and vocoder bytes on the same device; `tile_bytes_512`: a 512 px decode tile's activations
    (TILE_BYTES_512 for the released decoders; 0 leaves decoding out), the largest tile that fits is chosen; `side`:
    the modules that visit the device for their stage and Gemma's streamed layers; `ram`: the RAM available (None:
    not planned); `mappable`: the streamed weights are kept in their files' dtype, so they can be read from the
    memory-mapped files instead of pinned copies; `stream_all`: every block streamed (`--memory stream`); `source`:
    what `free` is, for the messages ("free", or "budget" when the user gave it); `decode_base`: what decoding holds
    besides its tiles (`sizes.diffusion_decode_bytes` for LTX-2.5's diffusion decoder); `sp`: one rank's plan under
    sequence parallelism of degree `sp` (its share of the activations, `activation_bytes`); `capability`: the CUDA
    device's compute capability (None: another device), whose measured crossover (`pass_policy`) caps the passes
    per forward before memory does."""
    context = _Context(config, weights, free, frames, height, width, fps, dtype, fp8_available, decoders, side,
                       source, decode_base, tile_bytes_512, sp, capability)
    plan = _sampling_plan(context, passes, stream_all)
    plan = plan._replace(free=free, decoders=decoders, tile_bytes_512=tile_bytes_512, side=side, source=source,
                         decode_base=decode_base)
    room = int(free * HEADROOM) - plan.device_weights - decoders - decode_base
    tile = next((t for t in TILE_SIZES if decode_tile_bytes(t, tile_bytes_512) <= room), None)
    if tile is None:
        smallest = decode_base + decode_tile_bytes(TILE_SIZES[-1], tile_bytes_512)
        room += decode_base
        raise MemoryPlanError(f"{context.budget()}; after sampling {size(max(room, 0))} is left for decoding next "
                              f"to the transformer's {size(plan.device_weights)} on the device, less than the "
                              f"smallest decode tile needs ({size(smallest)}); free memory on the device or use fp8 "
                              "weights")
    plan = plan._replace(decode_tile=tile)
    return plan if ram is None else _host_plan(plan, ram, mappable, fp8_available)


def plan_run(config: TransformerConfig, weights: WeightBytes, free: int, frames: int, height: int, width: int,
             passes: int, two_stage: bool, **options) -> MemoryPlan:
    """The plan of a whole run (`plan_memory`'s `options`): one-stage at height × width with `passes`; two-stage
    at half size with `passes`, then at full size with one pass; the tighter of the two stages' plans."""
    scale = 2 if two_stage else 1
    plans = [plan_memory(config, weights, free, frames, height // scale, width // scale, passes, **options)]
    if two_stage:
        plans.append(plan_memory(config, weights, free, frames, height, width, 1, **options))
    return min(plans, key=lambda plan: (plan.resident_blocks, plan.passes_per_forward, plan.decode_tile, plan.pin))


class _Context(NamedTuple):
    config: TransformerConfig
    weights: WeightBytes
    free: int
    frames: int
    height: int
    width: int
    fps: float
    dtype: torch.dtype
    fp8_available: bool
    decoders: int
    side: SideBytes
    source: str
    decode_base: int = 0
    tile_bytes_512: int = 0
    sp: int = 1
    capability: tuple[int, int] | None = None

    def decoding(self, height: int | None = None, width: int | None = None) -> int:
        """The diffusion decoder's smallest decode (its video-sized tensors scale with the size, its tiles with the
        frames), as large as a visiting stage: the blocks leave room for it; 0 for the conv decoder, whose tiles
        fit in what sampling leaves."""
        if not self.decode_base:
            return 0
        scale = (height or self.height) * (width or self.width) / (self.height * self.width)
        return int(self.decode_base * scale) + decode_tile_bytes(TILE_SIZES[-1], self.tile_bytes_512)

    def budget(self) -> str:
        """The budget and what is set aside, for the messages."""
        side = self.side
        aside = [f"decoders {size(self.decoders)}"] if self.decoders else []
        if side.encoding:
            aside.append(f"text encoder while encoding {size(side.encoding)}")
        if side.conditioning:
            aside.append(f"video encoder while encoding images {size(side.conditioning)}")
        if side.upsampling:
            aside.append(f"upsampler while upsampling {size(side.upsampling)}")
        if self.decoding():
            aside.append(f"the diffusion decoder's smallest tiles {size(self.decoding())}")
        return (f"{self.width}x{self.height}x{self.frames} on {size(self.free)} {self.source} "
                f"({size(self.free * HEADROOM)} usable)" + (f", set aside: {', '.join(aside)}" if aside else ""))


def _sampling_plan(c: _Context, passes: int, stream_all: bool) -> MemoryPlan:
    weights = c.weights
    budget = int(c.free * HEADROOM) - c.decoders
    floor = max(c.side.encoding, c.side.conditioning, c.side.upsampling, c.decoding())  # the other stages' peaks
    kv = text_kv_bytes(c.config, passes, c.dtype)

    def resident(batch: int, activations: int) -> MemoryPlan | None:
        for cache in ((True, False) if kv and not stream_all else (False,)):  # the cache goes before any block
            working = max(activations + (kv if cache else 0), floor)
            if not stream_all and budget - weights.non_block - working >= weights.per_block * weights.blocks:
                return MemoryPlan(weights.blocks, 0, batch, cache, weights, activations, kv, c.free)
        return None

    # where the device's policy prefers fewer passes per forward (resident weights; streamed ones are better
    # shared by every pass, below), that first
    preferred = policy_passes(c.capability, video_tokens(c.frames, c.height, c.width), passes)
    if preferred < passes and (plan := resident(preferred, activation_bytes(
            c.config, c.frames, c.height, c.width, preferred, c.dtype, c.fps, c.sp))):
        return plan
    for batch in sorted({passes, *(b for b in (2, 1) if b < passes)}, reverse=True):
        activations = activation_bytes(c.config, c.frames, c.height, c.width, batch, c.dtype, c.fps, c.sp)
        if preferred == passes and (plan := resident(batch, activations)):
            return plan
        working = max(activations, floor)
        left = budget - weights.non_block - working - weights.slots
        if left >= 0:
            resident = 0 if stream_all else min(left // weights.per_block, weights.blocks - 1)
            return MemoryPlan(resident, weights.blocks - resident, batch, False, weights, activations, kv, c.free)
    raise MemoryPlanError(_smallest_change(c))


def _host_plan(plan: MemoryPlan, ram: int, mappable: bool, fp8_available: bool) -> MemoryPlan:
    """Pinned streaming when it fits the RAM beside the visiting modules; else read from the memory-mapped files
    when the weights are kept in their files' dtype; else MemoryPlanError naming the change."""
    budget, streamed, visitors = ram * HOST_HEADROOM, plan.host_streamed, plan.side.visitors
    if streamed + visitors <= budget:
        return plan._replace(ram=ram, pin=True)
    if mappable and visitors <= budget:
        return plan._replace(ram=ram, pin=False)
    parts = [f"{plan.streamed_blocks} streamed blocks {size(plan.streamed_blocks * plan.weights.per_block)}"]
    if plan.side.gemma_layers:
        parts.append(f"Gemma's layers {size(plan.side.gemma_layers)}")
    message = (f"host memory: {size(ram)} of RAM available ({size(budget)} usable); the run needs "
               f"{size(streamed)} for streaming ({', '.join(parts)}) + {size(visitors)} for the modules that visit "
               "the device between their visits")
    changes = []  # the smallest first: keeping the dtypes maps the weights, the fp8 file halves what is pinned
    if not mappable and visitors <= budget:
        changes.append("keep the files' dtypes (loader weight_dtype auto and fp8 auto; no --dtype and --fp8 auto) "
                       "so the streamed weights are read from the memory-mapped files")
    if fp8_available and streamed - plan.streamed_blocks * plan.weights.per_block // 2 + visitors <= budget:
        changes.append("use the fp8 checkpoint (its streamed blocks are half the size)")
    return _refuse(message + "; " + (", or ".join(changes) or "close programs to free RAM, or use a card with more "
                                     "memory (fewer streamed blocks)"))


def _refuse(message: str) -> MemoryPlan:
    raise MemoryPlanError(message)


def _smallest_change(c: _Context) -> str:
    floor = max(c.side.encoding, c.side.conditioning, c.side.upsampling, c.decoding())
    usable = c.free * HEADROOM - c.decoders

    def need(weights: WeightBytes, height: int, width: int) -> int:
        return weights.non_block + weights.slots + max(
            activation_bytes(c.config, c.frames, height, width, 1, c.dtype, c.fps, c.sp), c.side.encoding,
            c.side.conditioning, c.side.upsampling, c.decoding(height, width))

    w = c.weights
    acts = activation_bytes(c.config, c.frames, c.height, c.width, 1, c.dtype, c.fps, c.sp)
    working = (f"activations {size(acts)}" if acts >= floor else
               f"the largest visiting stage {size(floor)} (more than sampling's activations {size(acts)})")
    message = (f"{c.budget()}; {size(max(usable, 0))} is left, with every block streamed and one pass per "
               f"forward the run needs {size(need(w, c.height, c.width))}: non-block weights {size(w.non_block)} + 2 "
               f"block slots {size(w.slots)} + {working}")
    if c.fp8_available:
        if need(transformer_weight_bytes(c.config, c.dtype, fp8=True), c.height, c.width) <= usable:
            return message + "; quantise the weights to fp8 (fp8 = quantize, --fp8 quantize) to halve them"
    for scale in (0.75, 0.5, 0.25):
        width, height = floor_size(c.width * scale), floor_size(c.height * scale)
        if need(w, height, width) <= usable:
            return message + f"; {width}x{height} fits (or fewer frames)"
    return message + "; use a GPU with more memory, or spread the model over several with tensor parallelism"


def apply_memory_plan(model: torch.nn.Module, plan: MemoryPlan, device: torch.device | str):
    """The plan on a loaded transformer: its streamed blocks streamed to `device` (pinned or from the loaded,
    memory-mapped tensors, as planned; the rest moved there) and the text K/V cache as planned; returns the
    BlockStreamer (None when every block is resident). The sampler takes `plan.passes_per_forward`."""
    from ltx2_core.memory.streaming import move_module, stream_blocks

    model.cache_text_kv = plan.cache_text_kv
    if plan.streamed_blocks:
        return stream_blocks(model, device, resident=plan.resident_blocks, pin=plan.pin)
    move_module(model, device)
    return None


# the byte counts live in memory.estimates; the tests and bench import them from here too
__all__ = ["GB", "HEADROOM", "HOST_HEADROOM", "TILE_BYTES_512", "TILE_SIZES", "MemoryPlan", "MemoryPlanError",
           "WeightBytes", "activation_bytes", "apply_memory_plan", "decode_tile_bytes", "decoder_bytes",
           "duration_head_bytes", "plan_memory", "plan_run", "size", "text_kv_bytes", "transformer_weight_bytes"]
