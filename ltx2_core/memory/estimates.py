"""The byte counts the memory plan adds up (`memory.plan`): the transformer's weight bytes per storage format
and rank (`transformer_weight_bytes`, counted on a meta model), one forward's activations (`activation_bytes`), the
per-run text K/V cache, a decode tile's activations, and the decoders' and the duration head's bytes read from file
headers; `size` writes bytes for people.

The activation figure is an estimate from the block's structure: the largest set of tensors alive at once inside
a block (the residual stream, the modulated input, q, k, v, the attention output, the 4x feed-forward hidden state
and its activation) for the video and audio tokens of the batch, the text side (projected contexts, a block's text
keys and values), plus the RoPE tables. `bench/memory_plan.py` compares it with fake-tensor accounting of a full
forward (it stays above it, by 10-40 %), and a test does at a small size.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.geometry import audio_latent_length, video_tokens
from ltx2_core.memory.weight_layout import LayerRule, layout_bytes, policy_layers
from ltx2_core.quant.policy import QUANTIZE_TO, weight_bytes

GB = 1e9
TEXT_TOKENS = 1024  # the connectors' output length of the releases
# tensors of width D alive at once inside a block, per token of the batch (the residual, the modulated input, q, k,
# v, the attention output, the feed-forward's 4·D hidden state and its GELU): fake-tensor accounting of the released
# models at 768x512x121 measures 2.3 GB for 2.3 with 4 passes, which this puts at 2.8 GB (bench/memory_plan.py)
LIVE_WIDTHS = 12
SP_WIDTHS = 4  # sequence parallel: the all-to-all's received q, k, v (stacked) and the output's, per local token
# the text side, per text token of the batch and width: the projected contexts kept for the run, the caption
# projection's intermediates, a block's text keys and values (dominant at small sizes: 1,024 text tokens)
TEXT_WIDTHS = 8


def size(count: int) -> str:
    """Bytes for people: 2.3 TB, 23.4 GB, 512.0 MB, 3.1 KB."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"



class WeightBytes(NamedTuple):
    """The transformer's weight bytes: the non-block weights, one block (the largest), the number of blocks, and
    the two streaming slots of each block kind (`slot_bytes`; 0: two of `per_block`, every block alike). Where
    blocks differ (a GGUF mixing types by layer) resident blocks count as the largest and every kind gets its
    slots, an upper bound of what the streamer holds (its kinds are those of the streamed blocks)."""

    non_block: int
    per_block: int
    blocks: int
    slot_bytes: int = 0

    @property
    def total(self) -> int:
        return self.non_block + self.per_block * self.blocks

    @property
    def slots(self) -> int:
        """What the streamer's slots hold on the device: two of each block kind (`memory.streaming`)."""
        return self.slot_bytes or 2 * self.per_block


def transformer_weight_bytes(config: TransformerConfig, dtype: torch.dtype = torch.bfloat16, fp8: bool = False,
                             tp: int = 1, layers: LayerRule | None = None) -> WeightBytes:
    """Weight bytes of the transformer in `dtype`, the linears the quantisation policy names in fp8 (one byte, plus a
    4-byte scale: `quant.policy.QUANTIZE_TO`) when `fp8`, the blocks' matrices divided over `tp` ranks (their
    vectors and the non-block weights replicated). `layers`: the linears stored as a file or format stores them
    (`memory.weight_layout`: `file_layers`, `policy_layers`, `gguf_layers`), counted layer by layer on the meta
    model (parameters and buffers, as the streamer holds them; one rank only)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    from ltx2_core.model.transformer import LTX2Transformer

    with unset_fake_temporarily(), torch.device("meta"):  # a caller's fake-tensor mode cannot convert meta weights
        model = LTX2Transformer(config)
    if layers is not None or (fp8 and tp == 1):
        if tp != 1:
            raise ValueError(f"a weight layout is counted for one rank; got tp={tp}")
        with unset_fake_temporarily():
            non_block, each, kinds = layout_bytes(model, dtype, layers if layers is not None else
                                                  policy_layers(QUANTIZE_TO))
        slots = {kind: 2 * size for kind, size in zip(kinds, each)}
        return WeightBytes(non_block, max(each), len(each), sum(slots.values()))
    size = torch.finfo(dtype).bits // 8

    def bytes_of(prefix: str, module: torch.nn.Module) -> int:
        total = 0
        for name, param in module.named_parameters():
            shard = tp if param.dim() == 2 and tp > 1 else 1
            total += weight_bytes(f"{prefix}{name}", param.numel(), size, shard, QUANTIZE_TO if fp8 else None)
        return total

    block = bytes_of("transformer_blocks.0.", model.transformer_blocks[0])
    non_block = sum(bytes_of(name + ".", m) for name, m in model.named_children() if name != "transformer_blocks")
    non_block += sum(p.numel() * size for p in model.parameters(recurse=False))
    return WeightBytes(non_block, block, config.num_layers)


def tokens(frames: int, height: int, width: int, fps: float = 24.0) -> tuple[int, int]:
    """(video tokens, audio tokens) of a clip."""
    return video_tokens(frames, height, width), audio_latent_length(frames, fps)


def activation_bytes(config: TransformerConfig, frames: int, height: int, width: int, batch: int,
                     dtype: torch.dtype = torch.bfloat16, fps: float = 24.0, sp: int = 1) -> int:
    """The estimated peak of one forward's activations for `batch` passes (see the module docstring). `sp`: one
    rank's share under Ulysses sequence parallelism (`parallel.sequence_parallel`): its 1/sp of the video tokens,
    plus the all-to-all copies of q, k, v and the attention output (SP_WIDTHS) and the video keys and values of
    every rank gathered for the video->audio attention (at the audio width)."""
    size = torch.finfo(dtype).bits // 8
    video, audio = tokens(frames, height, width, fps)
    everyone, video = video, -(-video // sp)
    live = batch * (video * config.video.width + audio * config.audio.width) * LIVE_WIDTHS * size
    text = batch * TEXT_TOKENS * (config.video.width + config.audio.width) * TEXT_WIDTHS * size
    rope = 2 * 2 * (video * config.video.width + audio * config.audio.width) * 4  # cos/sin tables, self and cross
    if sp > 1:
        live += batch * (video * config.video.width * SP_WIDTHS + 2 * everyone * config.audio.width) * size
    return live + text + rope


def text_kv_bytes(config: TransformerConfig, batch: int, dtype: torch.dtype = torch.bfloat16) -> int:
    """The per-run text K/V cache of LTX-2.0 and 2.5 (2.3 has none): keys and values of every block for the batch."""
    if not config.static_text_kv:
        return 0
    size = torch.finfo(dtype).bits // 8
    return config.num_layers * 2 * batch * TEXT_TOKENS * (config.video.width + config.audio.width) * size


# peak activations of one decoded tile with the video kept on the host (bench/video_decode.py, released decoders,
# bf16): 0.77 GiB at 512 px tiles; it scales with the tile's area
TILE_BYTES_512 = int(0.77 * 2**30)
TILE_SIZES = (512, 384, 256)


def decode_tile_bytes(tile: int, at_512: int = TILE_BYTES_512) -> int:
    return at_512 * tile * tile // (512 * 512)


def decoder_bytes(path) -> int:
    """The video and audio VAE decoders' and the vocoder's bytes in a checkpoint (its path) or in the files of a
    model's `Sources` (LTX-2.5: the video VAE file and the audio VAE file), headers only."""
    from ltx2_core.loader import read_header
    from ltx2_core.loader.sources import Component
    from ltx2_core.loader.vae_weights import DECODER, STATISTICS
    from ltx2_core.memory.sizes import model_sources

    sources = model_sources(path)
    video = sources[Component.VIDEO_DECODER]
    parts = [(video.path, (video.key(DECODER), video.key(STATISTICS)))]
    parts += [(sources[c].path, (sources[c].prefix,)) for c in (Component.AUDIO_DECODER, Component.VOCODER)]
    files = {}
    for file, prefixes in parts:  # one sum per file, so a bundle's tensors are counted once
        files[file] = files.get(file, ()) + prefixes
    return sum(_entry_bytes(e) for file, prefixes in files.items()
               for name, e in read_header(file).tensors.items() if name.startswith(prefixes))


def duration_head_bytes(sources) -> int:
    """LTX-2.5's duration head's bytes as loaded (fp32, on the device for the run: a few MB), 0 without one; headers
    only."""
    from ltx2_core.loader import read_header
    from ltx2_core.loader.safetensors_file import DTYPE_BYTES
    from ltx2_core.loader.sources import Component

    if Component.DURATION_HEAD not in sources:
        return 0
    source = sources[Component.DURATION_HEAD]
    return sum(_entry_bytes(e) // DTYPE_BYTES[e.dtype] * 4 for name, e in read_header(source.path).tensors.items()
               if name.startswith(source.prefix))


def _entry_bytes(entry) -> int:
    from ltx2_core.loader.safetensors_file import DTYPE_BYTES

    count = 1
    for dim in entry.shape:
        count *= dim
    return count * DTYPE_BYTES[entry.dtype]
