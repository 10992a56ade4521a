"""Bytes of what a generation holds besides the transformer, read from the files' headers before anything loads, and
the machine's RAM.

On the device the text side, the video encoder and the upsampler visit only for their stage (`offload`); in host
memory Gemma's decoder layers stream from (pinned unless the plan says otherwise) and the visiting modules wait
between their stages. The activation figures are estimates of the largest set of tensors alive at once:
* encoding: Gemma's hidden states of both prompts (49 × 2 × 1,024 × 3,840 values), held three times (the list, the
  stacked tensor and the normalised features the projection reads);
* an image: IMAGE_WIDTHS values per pixel through the encoder's first stages (its widest activations);
* upsampling: UPSAMPLE_WIDTHS tensors of the upsampler's width at the output latent's size.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import NamedTuple

import torch

from ltx2_core.geometry import video_tokens

PROMPTS, PROMPT_TOKENS = 2, 1024  # the positive and negative prompt, padded to the connectors' length
HIDDEN_COPIES = 3
IMAGE_WIDTHS = 64
UPSAMPLE_WIDTHS = 4
_LAYER = re.compile(r"^layers\.(\d+)\.")


class SideBytes(NamedTuple):
    """The modules beside the transformer, in bytes (0: not used by the run, or not known, e.g. the demo's)."""

    gemma_rest: int = 0  # Gemma's embeddings and norms
    gemma_layer: int = 0  # one decoder layer of each shape: two of each are the streaming slots while encoding
    gemma_layers: int = 0  # every decoder layer, streamed from host memory
    projection: int = 0  # the text projection and connectors
    video_encoder: int = 0  # 0 without images
    upsampler: int = 0  # 0 for one-stage runs
    encode_activations: int = 0
    image_activations: int = 0
    upsample_activations: int = 0
    projection_part: int = 0  # the largest part of the projection (they visit one at a time); 0: not known
    enhance_activations: int = 0  # prompt enhancement's KV cache, prefill and logits (`enhance_activation_bytes`)

    @property
    def encoding(self) -> int:
        """On the device while the prompts are enhanced (Gemma with its KV cache) and encoded: Gemma (its embeddings
        and norms, two streamed layers), then each part of the projection (Gemma has left), with the hidden states
        alive throughout."""
        gemma = self.gemma_rest + 2 * self.gemma_layer
        return max(gemma + max(self.encode_activations, self.enhance_activations),
                   (self.projection_part or self.projection) + self.encode_activations)

    @property
    def conditioning(self) -> int:
        return self.video_encoder + self.image_activations if self.video_encoder else 0

    @property
    def upsampling(self) -> int:
        return self.upsampler + self.upsample_activations if self.upsampler else 0

    @property
    def visitors(self) -> int:
        """In host memory between their visits (pageable): what visits the device for one stage."""
        return self.gemma_rest + self.projection + self.video_encoder + self.upsampler


def _dtype_bytes(dtype: torch.dtype) -> int:
    return torch.finfo(dtype).bits // 8


def _bytes(entry, dtype: torch.dtype | None) -> int:
    """An entry's bytes once loaded: floating entries cast to `dtype` (fp8 ones stay fp8), others as stored."""
    from ltx2_core.loader.safetensors_file import DTYPE_BYTES

    count = 1
    for dim in entry.shape:
        count *= dim
    cast = dtype is not None and entry.dtype in ("F16", "BF16", "F32")
    return count * (_dtype_bytes(dtype) if cast else DTYPE_BYTES[entry.dtype])


def checkpoint_side_bytes(path, dtype: torch.dtype | None) -> tuple[int, int]:
    """(text projection and connectors, video encoder) bytes of a checkpoint (its path) or of a model's `Sources`
    (LTX-2.5: the projection in the text encoder file, the connectors in the transformer's), from the headers."""
    from ltx2_core.loader.sources import Component
    from ltx2_core.loader.vae_weights import ENCODER, STATISTICS

    sources = model_sources(path)
    projection = sum(_prefixed_bytes(sources, prefix, dtype) for prefix in _text_prefixes(sources))
    video = sources[Component.VIDEO_ENCODER]
    encoder = _file_bytes(video.path, (video.key(ENCODER), video.key(STATISTICS)), dtype)
    return projection, encoder


def projection_part_bytes(path, dtype: torch.dtype | None) -> int:
    """The largest part of a checkpoint's (or `Sources`') text projection (the feature extractor or a connector),
    from the headers: what encoding holds of it at once (`offload.projection_parts`)."""
    sources = model_sources(path)
    return max(_prefixed_bytes(sources, prefix, dtype) for prefix in _text_prefixes(sources))


def model_sources(path):
    """`path` as a model's `Sources`: a checkpoint's path means its bundle; `Sources` are taken as given, and
    before LTX-2.5's text encoder file is chosen (a loader node) its projection is looked for in the transformer
    file, which does not hold it: counted 0."""
    from ltx2_core.loader.sources import BUNDLE, Component, Source, Sources

    if not isinstance(path, Sources):
        return Sources.bundled(path)
    if Component.TEXT_PROJECTION in path:
        return path
    stand_in = Source(path[Component.TEXT_CONNECTORS].path, BUNDLE[Component.TEXT_PROJECTION])
    return path.with_files({Component.TEXT_PROJECTION: stand_in})


def _text_prefixes(sources) -> list[str]:
    from ltx2_core.loader.text_weights import text_key_prefixes

    return list(text_key_prefixes(sources))


def _prefixed_bytes(sources, prefix: str, dtype: torch.dtype | None) -> int:
    """Bytes of the tensors under `prefix` in the text path's files (one file for a bundle, two for LTX-2.5, whose
    prefixes each occur in one of them)."""
    from ltx2_core.loader.sources import Component

    paths = dict.fromkeys(sources[c].path for c in (Component.TEXT_PROJECTION, Component.TEXT_CONNECTORS))
    return sum(_file_bytes(path, (prefix,), dtype) for path in paths)


def _file_bytes(path, prefixes: tuple[str, ...], dtype: torch.dtype | None) -> int:
    """Bytes of a file's tensors under `prefixes`; a GGUF's (the text connectors) once dequantised into `dtype`
    (bf16 by default), as they load."""
    from ltx2_core.loader import read_header
    from ltx2_core.loader.gguf_file import gguf_header
    from ltx2_core.loader.gguf_reader import is_gguf

    if is_gguf(path):
        size = _dtype_bytes(dtype or torch.bfloat16)
        return sum(size * math.prod(e.shape) for n, e in gguf_header(path).tensors.items() if n.startswith(prefixes))
    return sum(_bytes(e, dtype) for n, e in read_header(path).tensors.items() if n.startswith(prefixes))


def gemma_bytes(path, dtype: torch.dtype | None) -> tuple[int, int, int]:
    """(embeddings and norms, one layer of each shape, every layer) of a Gemma file or folder, from its headers.
    The streamer keeps two device slots per layer shape (Gemma 3: one shape; Gemma 4: its sliding and its
    full-attention layers), so two of the middle figure are what streaming holds on the device."""
    from ltx2_core.loader.gemma_files import find_gemma

    source = find_gemma(path)
    rest = 0
    layers: dict[str, list[tuple[str, tuple[int, ...], int]]] = {}
    for file, keys in source.shards:
        for key, file_key in keys.items():
            entry = file.tensors[file_key]
            size = _bytes(entry, dtype)
            if match := _LAYER.match(key):
                layers.setdefault(match[1], []).append((key[match.end():], tuple(entry.shape), size))
            else:
                rest += size
    shapes = {tuple(sorted((name, shape) for name, shape, _ in tensors)): sum(size for *_, size in tensors)
              for tensors in layers.values()}
    return rest, sum(shapes.values()), sum(size for tensors in layers.values() for *_, size in tensors)


def upsampler_bytes(path, dtype: torch.dtype | None) -> int:
    from ltx2_core.loader import read_header

    return sum(_bytes(e, dtype) for e in read_header(path).tensors.values())


def encode_activation_bytes(hidden_size: int, layers: int, dtype: torch.dtype) -> int:
    return HIDDEN_COPIES * (layers + 1) * PROMPTS * PROMPT_TOKENS * hidden_size * _dtype_bytes(dtype)


# prompt enhancement: the chat's tokens (Lightricks' system prompts are 3.8-4.7 kB, ~1.2k Gemma tokens, and the
# prompt) and the most it generates (Gemma 4: 600); the prefill's live values per token and hidden/intermediate
# width; fp32 logit copies of the last position (logits, scaled, masked, probabilities)
ENHANCE_PROMPT_TOKENS, ENHANCE_NEW_TOKENS, PREFILL_WIDTHS, LOGIT_COPIES = 2048, 600, 4, 4


def vision_tower_bytes(dtype: torch.dtype) -> int:
    """Gemma 3 12B's vision tower and projector (image-to-video enhancement) with its activations: weights of 27
    SigLIP layers and the patch / position embeddings, the 4096 patches' widest tensors (PREFILL_WIDTHS hidden + the
    MLP's intermediate) and the attention of one head."""
    from ltx2_core.model.text.vision import GEMMA3_12B_VISION as v

    hidden, inner, layers = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"]
    patches = (v["image_size"] // v["patch_size"]) ** 2
    weights = layers * (4 * hidden * hidden + 2 * hidden * inner) + patches * hidden + 3 * v["patch_size"] ** 2 * \
        hidden + hidden * int(GEMMA3_TEXT_HIDDEN)
    activations = patches * (PREFILL_WIDTHS * hidden + inner) + v["num_attention_heads"] * patches * patches
    return (weights + activations) * _dtype_bytes(dtype)


GEMMA3_TEXT_HIDDEN = 3840  # the projector's output width (Gemma 3 12B)


def enhance_activation_bytes(config, dtype: torch.dtype, image: bool = False) -> int:
    """What enhancing a prompt adds on the device beside Gemma's weights (`model.text.enhance`): the KV cache of
    every layer for the chat and the generated tokens, the prefill's activations, the last position's logits, and
    with an `image` the vision tower that sees it (`vision_tower_bytes`). `config`: the text model's values
    (`GemmaSource.config`)."""
    size = _dtype_bytes(dtype)
    layers, hidden = int(config["num_hidden_layers"]), int(config["hidden_size"])
    kv_width = int(config["num_key_value_heads"]) * int(config.get("global_head_dim") or config["head_dim"])
    kv = layers * 2 * kv_width * (ENHANCE_PROMPT_TOKENS + ENHANCE_NEW_TOKENS) * size
    prefill = ENHANCE_PROMPT_TOKENS * (PREFILL_WIDTHS * hidden + 3 * int(config["intermediate_size"])) * size
    return kv + prefill + LOGIT_COPIES * int(config["vocab_size"]) * 4 + (vision_tower_bytes(dtype) if image else 0)


def image_activation_bytes(images: int, height: int, width: int, dtype: torch.dtype) -> int:
    return images * IMAGE_WIDTHS * 3 * height * width * _dtype_bytes(dtype)


def upsample_activation_bytes(frames: int, height: int, width: int, mid_channels: int, dtype: torch.dtype) -> int:
    """At the upsampled latent's size: height and width are the output's pixels."""
    return UPSAMPLE_WIDTHS * mid_channels * video_tokens(frames, height, width) * _dtype_bytes(dtype)


# LTX-2.5's diffusion decoder holds every frame of a tile at once (stages 4-5 tile in space only) beside the
# video-sized starting noise, output and stage-3 features: fake-tensor accounting of the released structure, bf16, at
# 768x512x121 (bench/memory_plan.py) measures 9.08 GiB at 512 px tiles, 5.53 at 384 and 2.87 at 256, which
# 0.84 GiB for the whole video + 8.4 GiB × the tile's area / 512² covers (by 2 %, 1 %, 2 %): per frame, and per
# pixel and frame
DIFFUSION_TILE_BYTES_512_PER_FRAME = int(8.4 * 2**30 / 121)
DIFFUSION_DECODE_BYTES_PER_PIXEL = 19


def diffusion_decode_bytes(frames: int, height: int, width: int) -> tuple[int, int]:
    """(the bytes decoding holds for the whole video, a 512 px tile's activations) of the LTX-2.5 diffusion
    decoder for a video of frames × height × width pixels (`plan_memory`'s `decode_base` and `tile_bytes_512`)."""
    return DIFFUSION_DECODE_BYTES_PER_PIXEL * frames * height * width, DIFFUSION_TILE_BYTES_512_PER_FRAME * frames


def device_room(device: torch.device) -> int:
    """A GPU's free memory now: what the driver has free plus what PyTorch's caching allocator holds unused (it
    reuses that before asking the driver)."""
    cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return torch.cuda.mem_get_info(device)[0] + max(0, cached)


def ram_bytes() -> int | None:
    """The RAM available to this run now (`host_room`), None where it cannot be read."""
    return host_room()[0]


def host_room() -> tuple[int | None, str]:
    """(bytes this process may still allocate on the host, what sets it): the least of the system's available RAM
    (MemAvailable: free memory plus what it can reclaim), the room under the process's limits (RLIMIT_DATA against
    its data segments, RLIMIT_AS against its address space: `prlimit`, `ulimit -d / -v`) and its cgroup's
    (memory.max, a container's limit). (None, "") where none can be read."""
    rooms = [room for room in (_available(), *_rlimit_rooms(), _cgroup_room()) if room is not None]
    return min(rooms, default=(None, ""))


def _available() -> tuple[int, str] | None:
    meminfo = _fields(Path("/proc/meminfo"))
    if "MemAvailable" in meminfo:
        return meminfo["MemAvailable"], "RAM available"
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available), "RAM available"


def _fields(path: Path) -> dict[str, int]:
    """A /proc file's "Name: value kB" lines in bytes."""
    if not path.exists():
        return {}
    fields = {}
    for line in path.read_text().splitlines():
        name, _, value = line.partition(":")
        if value.strip().endswith("kB"):
            fields[name] = int(value.split()[0]) * 1024
    return fields


def _rlimit_rooms() -> list[tuple[int, str]]:
    """The room under the data-segment and address-space limits, where set."""
    try:
        import resource
    except ImportError:  # not on Windows
        return []
    status = _fields(Path("/proc/self/status"))
    rooms = []
    for limit, used, name in ((resource.RLIMIT_DATA, "VmData", "RLIMIT_DATA"), (resource.RLIMIT_AS, "VmSize",
                                                                                   "RLIMIT_AS")):
        soft = resource.getrlimit(limit)[0]
        if soft != resource.RLIM_INFINITY and used in status:
            rooms.append((max(0, soft - status[used]), f"the process's {name} limit of {_gb(soft)}"))
    return rooms


def _cgroup_room() -> tuple[int, str] | None:
    """The room under this process's cgroup memory limit (v2 memory.max, v1 memory.limit_in_bytes), where set."""
    cgroup = Path("/proc/self/cgroup")
    if not cgroup.exists():
        return None
    for line in cgroup.read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            folder, files = Path("/sys/fs/cgroup") / path.lstrip("/"), ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            folder = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            files = ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        if (room := _cgroup_file_room(folder / files[0], folder / files[1])) is not None:
            return room
    return None


def _cgroup_file_room(limit: Path, usage: Path) -> tuple[int, str] | None:
    try:
        text, used = limit.read_text().strip(), int(usage.read_text())
    except (OSError, ValueError):
        return None
    if text == "max" or int(text) >= 1 << 60:  # v1 writes "no limit" as a page-rounded 2^63
        return None
    return max(0, int(text) - used), f"the cgroup's memory limit of {_gb(int(text))}"


def _gb(count: int) -> str:
    return f"{count / 1e9:.1f} GB"


def side_bytes(checkpoint, text_encoder, upsampler, dtype: torch.dtype, *, images: int, frames: int, height: int,
               width: int, enhance: bool = False, temporal_upsampler=None) -> SideBytes:
    """What a run of these files holds beside the transformer (headers only): the text side always, the video
    encoder with `images`, the upsampler when given (two-stage), at the full size height × width; DFR's temporal
    upsampler (`temporal_upsampler`, its rounds) beside the spatial one. `checkpoint`: a bundle's path or the
    model's `Sources`."""
    projection, encoder = checkpoint_side_bytes(checkpoint, dtype)
    rest, layer, layers = gemma_bytes(text_encoder, dtype)
    config = find_gemma_config(text_encoder)
    side = SideBytes(gemma_rest=rest, gemma_layer=layer, gemma_layers=layers, projection=projection,
                     projection_part=projection_part_bytes(checkpoint, dtype),
                     encode_activations=encode_activation_bytes(int(config["hidden_size"]),
                                                                int(config["num_hidden_layers"]), dtype),
                     enhance_activations=enhance_activation_bytes(config, dtype, image=images > 0) if enhance else 0)
    if images:
        side = side._replace(video_encoder=encoder,
                             image_activations=image_activation_bytes(images, height, width, dtype))
    if upsampler is not None:
        from ltx2_core.loader import read_header
        from ltx2_core.loader.upsampler_weights import upsampler_config

        mid = upsampler_config(read_header(upsampler)).mid_channels
        side = side._replace(upsampler=upsampler_bytes(upsampler, dtype),
                             upsample_activations=upsample_activation_bytes(frames, height, width, mid, dtype))
        if temporal_upsampler is not None:  # both held for the run; `frames` (DFR's output canvas) bounds its pass
            side = side._replace(upsampler=side.upsampler + upsampler_bytes(temporal_upsampler, dtype))
    return side


def find_gemma_config(text_encoder):
    from ltx2_core.loader.gemma_files import find_gemma

    return find_gemma(text_encoder).config


def gemma_12b_bytes(dtype: torch.dtype) -> tuple[int, int, int]:
    """`gemma_bytes` of Gemma 3 12B in `dtype`, for a plan made before its file is chosen (the loader nodes)."""
    from ltx2_core.model.text.gemma3 import GEMMA3_12B_TEXT as g

    width, attention = g["hidden_size"], g["num_attention_heads"] * g["head_dim"]
    kv = g["num_key_value_heads"] * g["head_dim"]
    layer = 2 * width * attention + 2 * width * kv + 3 * width * g["intermediate_size"] + 4 * width + 2 * g["head_dim"]
    size, layers = _dtype_bytes(dtype), g["num_hidden_layers"]
    return (g["vocab_size"] * width + width) * size, layer * size, layers * layer * size


def text_and_image_bytes(checkpoint, dtype: torch.dtype | None, frames: int, height: int, width: int) -> SideBytes:
    """`side_bytes` for a plan made before the text encoder and the upsampler are chosen (the loader nodes): Gemma 3
    12B in the checkpoint's dtype, the checkpoint's text projection, its video encoder with one image of height ×
    width (the upsampler's stage, about 1 GB, is smaller than encoding's). `checkpoint`: a bundle's path or the
    model's `Sources`."""
    from ltx2_core.model.text.gemma3 import GEMMA3_12B_TEXT

    dtype = dtype or torch.bfloat16
    projection, encoder = checkpoint_side_bytes(checkpoint, dtype)
    rest, layer, layers = gemma_12b_bytes(dtype)
    return SideBytes(rest, layer, layers, projection, encoder,
                     encode_activations=encode_activation_bytes(GEMMA3_12B_TEXT["hidden_size"],
                                                                GEMMA3_12B_TEXT["num_hidden_layers"], dtype),
                     image_activations=image_activation_bytes(1, height, width, dtype),
                     projection_part=projection_part_bytes(checkpoint, dtype))
