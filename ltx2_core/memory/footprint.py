"""What a whole request allocates, stage by stage, on the device and on the host, counted from its sizes before
anything is allocated (`request_memory`), and the check every node and the command line make with it against what
is free on each now (`request_problem`): a refusal naming the numbers and the nearest size that fits.

The models' weights are not counted here (the memory plan places them, `memory.plan`); each stage counts what it
allocates beyond them, in the order a generation runs them, and how long each part is held (`Part.until`: its
stage, a later one, or the job's end); a `Job` names the stages one call runs (a node its own, the generate node
and the command line all):
* latent: the empty latent, float32 on the host (video 128 × F' × H/32 × W/32, audio 8 × 25 latents a second);
* encoding: the video encoder's activations for the images, control videos and held video, each frame counted as
  an image (`sizes.image_activation_bytes`, as the plan counts them);
* sampling: one forward's activations for the passes it batches (`plan.activation_bytes`, which holds the text
  contexts and their keys and values), the loop's token state (STATE_VALUES float32 values per token and channel:
  clean, noise, noisy latent, its float32 mix, denoised, the passes' velocities) and the sampled latent; two-stage
  samples at half size, then at full size;
* upsampling: the upsampler's activations (`sizes.upsample_activation_bytes`) and the ×2 latent;
* decoding: one tile's activations (the largest tile `tiling.tile_axes` cuts, DECODE_FIXED + DECODE_PER_CHANNEL ×
  the decoder's base width bytes per pixel frame of the tile; LTX-2.5's diffusion decoder: `sizes.
  diffusion_decode_bytes`), the audio decoder and the vocoder over the whole sound (the larger of AUDIO_DECODER_VALUES
  a second and VOCODER_VALUES a second and channel of the vocoder's width); on
  the host the decoded video (float32, 12 B per pixel frame) and the waveform;
* frames: the frames (F, H, W, 3), another float32 copy made while the decoded video is alive, and the NaN check's
  pieces (`finite.all_finite`);
* writing the mp4 (the command line's, or ComfyUI's SaveVideo of a node's frames, which converts one frame at a time
  as ours does): the H.264 encoder's frame buffers (WRITER_FIXED and WRITER_PIXEL bytes per pixel of up to
  WRITER_FRAMES frames: measured with libx264 on 2 cores, 512x512 to 2048x2048, 9 to 97 frames) and the sound's
  copies.

Fake-tensor accounting of the released decoders (tests/unit/test_request_memory.py) and the resident set of a real
CPU run (the same file) hold these figures. On a CPU the device is the host: both sides count against the RAM.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from ltx2_core.finite import PIECE
from ltx2_core.geometry import (
    AUDIO_DOWNSAMPLE,
    AUDIO_HOP,
    AUDIO_SAMPLE_RATE,
    audio_latent_length,
    is_frame_count,
    latent_shape,
    pixel_size,
    video_tokens,
)
from ltx2_core.memory.plan import activation_bytes, size
from ltx2_core.memory.sizes import (
    device_room,
    diffusion_decode_bytes,
    host_room,
    image_activation_bytes,
    upsample_activation_bytes,
)
from ltx2_core.model.decoders import Decoders
from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.model.video_vae.tiling import TilingConfig, tile_axes

STAGES = ("latent", "encoding", "sampling", "upsampling", "decoding", "frames", "writing")
KEPT = STAGES[-1]  # a part held to the job's end
LATENT_CHANNELS, AUDIO_VALUES = 128, 8 * 16  # a video latent cell's values; an audio latent's
STATE_VALUES = 8  # float32 values per token and channel the sampling loop keeps beside the activations
# a decode tile's peak per pixel frame of the tile: the float32 tile and its blend (DECODE_FIXED) and the decoder's
# activations, which scale with its base width (bytes per channel of it): fake-tensor accounting of the released
# decoders (base 128) measures 55-79 B in bf16 and 134 B in float32, the demo's (base 8) 28 B in float32
DECODE_FIXED, DECODE_PER_CHANNEL = 20, 0.25
FRAME_BYTES = 3 * 4  # a float32 RGB pixel frame: the decoded video (3, F, H, W) and the frames (F, H, W, 3)
FINITE_CHECK = 7  # torch.isfinite of a float32 value (of one piece): its absolute value and three boolean masks
WRITER_FIXED, WRITER_FRAMES, WRITER_PIXEL = 40_000_000, 32, 10
# the peak values per second of sound of the audio VAE decoder (its mel stages: 6.2 M, released and tiny alike) and
# of the vocoder per channel of its width (2.0's HiFi-GAN 1024 wide 5.3 k, 2.3's BigVGAN 1536 wide with its bandwidth
# extension 5.5 k; fake-tensor accounting), one after the other; the sound's float32 stereo at 48 kHz
AUDIO_DECODER_VALUES, VOCODER_VALUES, WAVEFORM_BYTES = 6_300_000, 5_600, 2 * 48_000 * 4
RELEASED_DECODER_CHANNELS, RELEASED_UPSAMPLER_CHANNELS, RELEASED_VOCODER_CHANNELS = 128, 1024, 1536
AUDIO_LATENTS_PER_SECOND = AUDIO_SAMPLE_RATE / AUDIO_HOP / AUDIO_DOWNSAMPLE


class Job(NamedTuple):
    """One call's share of a request: the clip (the final size: frames 8k+1, width × height pixels, fps), the
    `stages` it runs (of STAGES, in that order), the guidance `passes` it samples with, and what shapes them.
    `window`: the frames sampled at once (a long clip's window; None: every frame). `encoded_frames`: frames the
    video encoder takes (images, control videos, a held video). `tiling`: the video decoder's tiles (None: whole).
    `video` False: text to audio (no video latent, no frames)."""

    frames: int
    height: int
    width: int
    fps: float = 24.0
    stages: tuple[str, ...] = STAGES
    passes: int = 1
    two_stage: bool = False
    window: int | None = None
    encoded_frames: int = 0
    tiling: TilingConfig | None = TilingConfig()
    video: bool = True

    @classmethod
    def of_latent(cls, video: torch.Tensor | None, audio: torch.Tensor, fps: float, stages: tuple[str, ...],
                  **fields) -> Job:
        """The job of a latent's clip: video (B, 128, F', H', W'), or None for audio alone (audio (B, 8, T, 16):
        T latents, 25 a second); `fps` 0 (a native video latent's, unknown) counts as 24."""
        if video is None:
            return cls(audio.shape[2], 0, 0, AUDIO_LATENTS_PER_SECOND, stages, video=False, **fields)
        return cls(*pixel_size(*video.shape[2:]), fps if fps > 0 else 24.0, stages, **fields)

    @property
    def seconds(self) -> float:
        return self.frames / self.fps


class ModelSizes(NamedTuple):
    """What the counts need of the model: the transformer's `config` (None: no transformer, e.g. an empty latent),
    the compute `dtype`, the video decoder's base width (`decoder_channels`; LTX-2.5's `diffusion` decoder instead),
    the upsampler's and the vocoder's widths, the plan's cap on the passes of one forward, and whether sampling runs
    here (False: on workers, which meet their own devices' memory)."""

    config: TransformerConfig | None = None
    dtype: torch.dtype = torch.bfloat16
    decoder_channels: int = RELEASED_DECODER_CHANNELS
    diffusion: bool = False
    upsampler_channels: int = RELEASED_UPSAMPLER_CHANNELS
    passes_per_forward: int | None = None
    sampling_here: bool = True
    vocoder_channels: int = RELEASED_VOCODER_CHANNELS

    @classmethod
    def of(cls, config: TransformerConfig | None, dtype: torch.dtype, decoders: Decoders | None = None,
           upsampler: torch.nn.Module | None = None, **fields) -> ModelSizes:
        """The sizes of loaded modules: the decoders' and the upsampler's widths read from their configs."""
        video = getattr(decoders, "video", None)
        channels = getattr(getattr(video, "config", None), "decoder_base_channels", None)
        vocoder = getattr(decoders, "vocoder", None)
        generator = getattr(getattr(vocoder, "vocoder", vocoder), "config", None)  # 2.3's BigVGAN, 2.0's HiFi-GAN
        mid = getattr(getattr(upsampler, "config", None), "mid_channels", RELEASED_UPSAMPLER_CHANNELS)
        return cls(config, dtype, channels or RELEASED_DECODER_CHANNELS, video is not None and channels is None,
                   mid, vocoder_channels=getattr(generator, "initial_channels", RELEASED_VOCODER_CHANNELS), **fields)

    @property
    def value_bytes(self) -> int:
        return torch.finfo(self.dtype).bits // 8


class Part(NamedTuple):
    """`bytes` a stage allocates on the device or the host, held `until` the end of that stage (None: its own; KEPT:
    the job's end, an output)."""

    name: str
    bytes: int
    on_device: bool
    until: str | None = None


class Footprint(NamedTuple):
    """Each stage a job runs with its parts, in order."""

    stages: tuple[tuple[str, tuple[Part, ...]], ...]

    def peaks(self, shared: bool) -> list[tuple[str, int, int]]:
        """(stage, device bytes, host bytes) at each stage's peak: its parts with what earlier stages still hold;
        `shared`: the device is the host (a CPU), so the device's bytes count on the host too."""
        order = {name: index for index, name in enumerate(STAGES)}
        held: list[Part] = []
        peaks = []
        for stage, parts in self.stages:
            held = [p for p in held if order[p.until] >= order[stage]]
            alive = held + list(parts)
            device = sum(p.bytes for p in alive if p.on_device)
            host = sum(p.bytes for p in alive if not p.on_device)
            peaks.append((stage, 0 if shared else device, host + device if shared else host))
            held += [p for p in parts if p.until is not None and order[p.until] > order[stage]]
        return peaks

    def peak(self, shared: bool) -> tuple[int, int]:
        """The largest (device, host) bytes of any stage."""
        peaks = self.peaks(shared)
        return max((d for _, d, _ in peaks), default=0), max((h for _, _, h in peaks), default=0)


def request_memory(job: Job, model: ModelSizes = ModelSizes()) -> Footprint:
    """The job's stages with what each allocates (module docstring)."""
    unknown = set(job.stages) - set(STAGES)
    if unknown:
        raise ValueError(f"unknown stages {sorted(unknown)}; a job runs some of {', '.join(STAGES)}")
    counts = {"latent": _latent, "encoding": _encoding, "sampling": _sampling, "upsampling": _upsampling,
              "decoding": _decoding, "frames": _frames, "writing": _writing}
    return Footprint(tuple((stage, tuple(p for p in counts[stage](job, model) if p.bytes))
                           for stage in STAGES if stage in job.stages))


def latent_bytes(job: Job, height: int | None = None, width: int | None = None, frames: int | None = None) -> int:
    """A float32 latent of the clip (video and audio), at `height` × `width` when given (a stage's size)."""
    frames = frames or job.frames
    audio = audio_latent_length(frames, job.fps) * AUDIO_VALUES * 4
    if not job.video:
        return audio
    return LATENT_CHANNELS * video_tokens(frames, height or job.height, width or job.width) * 4 + audio


def _first_size(job: Job) -> tuple[int, int]:
    scale = 2 if job.two_stage else 1
    return job.height // scale, job.width // scale


def _latent(job: Job, model: ModelSizes) -> list[Part]:
    return [Part("the empty latent", latent_bytes(job, *_first_size(job)), False, until=KEPT)]


def _encoding(job: Job, model: ModelSizes) -> list[Part]:
    return [Part("the video encoder's activations", image_activation_bytes(job.encoded_frames, job.height, job.width,
                                                                            model.dtype), True)]


def _sampling(job: Job, model: ModelSizes) -> list[Part]:
    frames = min(job.frames, job.window or job.frames)
    sizes = [_first_size(job)] + ([(job.height, job.width)] if job.two_stage else [])
    height, width = sizes[-1]
    tokens = (video_tokens(frames, height, width) if job.video else 0) + audio_latent_length(frames, job.fps)
    parts = [Part("the sampled latent", latent_bytes(job), True, until=KEPT)]
    if model.config is None or not model.sampling_here:
        return parts
    batch = min(job.passes, model.passes_per_forward or job.passes)
    acts = max(activation_bytes(model.config, frames, h if job.video else 0, w if job.video else 0, batch,
                                model.dtype, job.fps) for h, w in sizes)
    return parts + [Part(f"activations of {batch} pass{'es' if batch > 1 else ''}", acts, True),
                    Part("the sampling state", STATE_VALUES * 4 * LATENT_CHANNELS * tokens, True)]


def _upsampling(job: Job, model: ModelSizes) -> list[Part]:
    if not (job.two_stage and job.video):
        return []
    frames = min(job.frames, job.window or job.frames)
    return [Part("the upsampler's activations", upsample_activation_bytes(
                frames, job.height, job.width, model.upsampler_channels, model.dtype), True),
            Part("the x2 latent", latent_bytes(job, frames=frames), True, until=KEPT)]


def decode_tile_bytes(job: Job, model: ModelSizes) -> int:
    """The device bytes of decoding the video: the largest tile's activations (LTX-2.5's diffusion decoder: the
    video-sized tensors and one tile's)."""
    if model.diffusion:
        base, at_512 = diffusion_decode_bytes(job.frames, job.height, job.width)
        tile = (job.tiling.spatial_tile or max(job.height, job.width)) if job.tiling else max(job.height, job.width)
        return base + at_512 * min(tile, max(job.height, job.width)) ** 2 // 512**2
    axes = tile_axes(latent_shape(job.frames, job.height, job.width), job.tiling or TilingConfig.off())
    pixels = 1
    for axis in axes:
        pixels *= max(piece.stop - piece.start for piece in axis.output)
    whole = all(len(axis.output) == 1 for axis in axes)  # one tile: its float32 output is the decoded video
    fixed = DECODE_FIXED - (FRAME_BYTES if whole else 0)
    return int(pixels * (fixed + DECODE_PER_CHANNEL * model.decoder_channels * model.value_bytes))


def _decoding(job: Job, model: ModelSizes) -> list[Part]:
    """The tiles into the decoded video on the host (held while the frames are made of it), and the sound."""
    values = max(AUDIO_DECODER_VALUES, VOCODER_VALUES * model.vocoder_channels)
    audio = int(job.seconds * values * model.value_bytes)
    parts = [Part("the audio decoder's activations", audio, True),
             Part("the waveform", int(job.seconds * WAVEFORM_BYTES), False, until=KEPT)]
    if not job.video:
        return parts
    return parts + [Part("a decode tile's activations", decode_tile_bytes(job, model), True),
                    Part("the decoded video", FRAME_BYTES * job.frames * job.height * job.width, False,
                         until="frames")]


def _frames(job: Job, model: ModelSizes) -> list[Part]:
    """The decoded video's NaN check (`finite.all_finite`'s pieces) and the frames made of it (F, H, W, 3)."""
    if not job.video:
        return []
    values = 3 * job.frames * job.height * job.width
    return [Part("the frames", FRAME_BYTES // 3 * values, False, until=KEPT),
            Part("the NaN check", FINITE_CHECK * min(values, PIECE), False)]


def _writing(job: Job, model: ModelSizes) -> list[Part]:
    frames = min(job.frames, WRITER_FRAMES) if job.video else 0
    return [Part("the encoder's frame buffers", WRITER_FIXED + WRITER_PIXEL * frames * job.height * job.width, False),
            Part("the sound's copies", int(job.seconds * WAVEFORM_BYTES), False)]


STAGE_WORDS = {"latent": "making the latent", "encoding": "encoding the images", "sampling": "sampling",
               "upsampling": "upsampling", "decoding": "decoding", "frames": "making the frames",
               "writing": "writing the mp4"}


class Room(NamedTuple):
    """What may still be allocated: on the device (None: the device is the host, or not known) and on the host
    (None: not known), and what sets the host's figure (`sizes.host_room`)."""

    device: int | None
    host: int | None
    host_reason: str = "RAM available"

    @classmethod
    def now(cls, device: torch.device | None) -> Room:
        """The room on `device` (a GPU; None or the CPU: the host alone) and on the host now."""
        host, reason = host_room()
        return cls(device_room(device) if device is not None and device.type == "cuda" else None, host, reason)

    @property
    def shared(self) -> bool:
        return self.device is None


class Overflow(NamedTuple):
    stage: str
    on_device: bool
    need: int
    free: int


def overflow(job: Job, model: ModelSizes, room: Room) -> Overflow | None:
    """The first stage of `job` whose peak exceeds the room on the device or the host (None: every stage fits)."""
    for stage, device, host in request_memory(job, model).peaks(room.shared):
        if room.device is not None and device > room.device:
            return Overflow(stage, True, device, room.device)
        if room.host is not None and host > room.host:
            return Overflow(stage, False, host, room.host)
    return None


def request_problem(job: Job, model: ModelSizes = ModelSizes(), device: torch.device | None = None,
                    room: Room | None = None) -> str | None:
    """Why `job` cannot run now on `device` (where the model computes; None or the CPU: the host, whose RAM then
    holds both sides): the first stage that would not fit the free memory, its largest parts, what is free and why,
    and the nearest clip that fits (fewer frames at this size, or a smaller size with these frames). None when it
    fits or the free memory is unknown. `room`: what is free (default: measured now, `Room.now`)."""
    room = room or Room.now(device)
    found = overflow(job, model, room)
    if found is None:
        return None
    parts = [p for stage, ps in request_memory(job, model).stages if stage == found.stage for p in ps
             if p.on_device == found.on_device or room.shared]
    held = found.need - sum(p.bytes for p in parts)  # what the stages before it keep (their outputs)
    parts += [Part("what earlier stages keep", held, found.on_device)] if held > 0 else []
    listed = ", ".join(f"{p.name} {size(p.bytes)}" for p in sorted(parts, key=lambda p: -p.bytes)[:4])
    where, free = ("on the device", f"free on {device}") if found.on_device else ("of RAM", room.host_reason)
    fitting = nearest(job, lambda smaller: overflow(smaller, model, room) is None)
    return (f"{describe(job)} needs {size(found.need)} {where} while {STAGE_WORDS[found.stage]} ({listed}), and "
            f"{size(found.free)} is free ({free}); {fitting}")


def describe(job: Job) -> str:
    if not job.video:
        return f"{job.seconds:.1f} s of sound"
    return f"{job.width}x{job.height}, {job.frames} frames"


def nearest(job: Job, fits: Callable[[Job], bool]) -> str:
    """The nearest jobs that fit: the most frames (8k+1; a long clip's duration) at this size, and the largest size
    (keeping the aspect, multiples of 32, of 64 for two-stage) at this length; where neither alone fits, the
    largest size at half, a quarter, ... of the frames."""
    options = []
    shorter = lambda f: job._replace(frames=f, window=min(job.window or f, f))  # noqa: E731
    frames = _largest([f for f in range(1, job.frames, 8) if is_frame_count(f)], lambda f: fits(shorter(f)))
    if frames is not None:
        seconds = f"{frames / job.fps:.1f} s"
        options.append(seconds if not job.video else f"{seconds} at this size" if job.window else
                       f"{frames} frame{'s' if frames > 1 else ''} ({seconds}) at this size")
    if job.video:
        size = _largest_size(job, fits)
        options += [f"{size.width}x{size.height} at this length"] if size is not None else []
    count = job.frames
    while job.video and not options and count > 1:
        count = (count - 1) // 16 * 8 + 1  # about half, 8k+1
        if (size := _largest_size(shorter(count), fits)) is not None:
            options.append(f"{size.width}x{size.height} with {count} frames ({count / job.fps:.1f} s)")
    if not options:
        return "nothing smaller fits either: free memory (close other programs, unload other models) first"
    lower = "duration, window, width or height" if job.window else "frames, width or height" if job.video else \
        "duration"
    return f"{' or '.join(options)} would fit; lower the {lower}"


def _largest_size(job: Job, fits: Callable[[Job], bool]) -> Job | None:
    """The job at the largest smaller size that fits (the aspect kept, in multiples of 32, of 64 for two-stage)."""
    step = 64 if job.two_stage else 32
    resized = lambda w: job._replace(width=w, height=max(step, job.height * w // job.width // step * step))  # noqa: E731
    width = _largest(list(range(step, job.width, step)), lambda w: fits(resized(w)))
    return None if width is None else resized(width)


def _largest(candidates: list[int], fits: Callable[[int], bool]) -> int | None:
    """The largest of ascending `candidates` that fits (bisection: a smaller one needs no more memory)."""
    low, high = 0, len(candidates)
    while low < high:
        middle = (low + high) // 2
        if fits(candidates[middle]):
            low = middle + 1
        else:
            high = middle
    return candidates[low - 1] if low else None
