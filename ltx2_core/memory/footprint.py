"""What a whole request allocates, stage by stage, on the device and on the host, counted from its sizes before
anything is allocated (`request_memory`); `memory.request_check.request_problem` checks it against what is free.

The models' weights are not counted here (the memory plan places them, `memory.plan`); each stage counts what it
allocates beyond them, in the order a generation runs them, and how long each part is held (`Part.until`: its
stage, a later one, or the job's end); a `Job` names the stages one call runs (a node its own, the generate node
and the command line all):
* latent: the empty latent, float32 on the host (video 128 × F' × H/32 × W/32, audio 8 × 25 latents a second);
* encoding: the video encoder's activations for the images (IMAGE_WIDTHS values a pixel) and the frames of the
  control videos and a held video (VIDEO_ENCODE_VALUES a pixel frame: fake-tensor accounting of the released
  encoder, 64 for one frame, 32-34 for 9 to 49), and the held video's frames on the host (two float32 copies);
* sampling: one forward's activations for the passes it batches (`estimates.activation_bytes`, which holds the text
  contexts and their keys and values; the tokens controls append at LIVE_WIDTHS too), the loop's token state (STATE_VALUES float32 values per token and channel:
  clean, noise, noisy latent, its float32 mix, denoised, the passes' velocities) and the sampled latent; two-stage
  samples at half size, then at full size; the res_2s sampler (`sampling.res2s`) adds its float64 working tensors
  (RES2S_VALUES per token and channel: the anchor, both predictions, ε, the midpoint, the step, four SDE noises);
* upsampling: the upsampler's activations (`sizes.upsample_activation_bytes`) and the ×2 latent;
* decoding: one tile's activations (the largest tile `tiling.tile_axes` cuts, DECODE_FIXED + DECODE_PER_CHANNEL ×
  the decoder's base width bytes per pixel frame of the tile; LTX-2.5's diffusion decoder: `sizes.
  diffusion_decode_bytes`), the audio decoder and the vocoder over the whole sound (the larger of AUDIO_DECODER_VALUES
  a second and VOCODER_VALUES a second and channel of the vocoder's width); on
  the host the decoded video (float32, 12 B per pixel frame) and the waveform; decoded on workers, no tile here but
  the video twice while it is copied out of the shared memory it arrives in;
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

import math
from typing import NamedTuple

import torch

from ltx2_core.finite import PIECE
from ltx2_core.geometry import (
    AUDIO_DOWNSAMPLE,
    AUDIO_HOP,
    AUDIO_SAMPLE_RATE,
    audio_latent_length,
    latent_shape,
    pixel_size,
    video_tokens,
)
from ltx2_core.memory.estimates import LIVE_WIDTHS, activation_bytes
from ltx2_core.memory.sizes import (
    IMAGE_WIDTHS,
    diffusion_decode_bytes,
    upsample_activation_bytes,
)
from ltx2_core.model.decoders import Decoders
from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.model.video_vae.tiling import TilingConfig, tile_axes

STAGES = ("latent", "encoding", "sampling", "upsampling", "decoding", "frames", "writing")
KEPT = STAGES[-1]  # a part held to the job's end
LATENT_CHANNELS, AUDIO_VALUES = 128, 8 * 16  # a video latent cell's values; an audio latent's
VIDEO_ENCODE_VALUES = 34  # the video encoder's values per pixel frame of a video
STATE_VALUES = 8  # float32 values per token and channel the sampling loop keeps beside the activations
RES2S_VALUES = 10  # float64 values per token and channel a res_2s step holds at its peak (both streams' share)
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
    `window`: the frames sampled at once (a long clip's window; None: every frame). `images`, `video_frames`: the
    images and the frames of videos (controls, a held video) the video encoder takes; `guide_tokens`: the video
    tokens conditions append (controls to the first stage's, images and keyframes at the last stage's size).
    `tiling`: the video decoder's tiles (None: whole).
    `video` False: text to audio (no video latent, no frames). `reference_seconds`: a sound the audio encoder takes
    and appends as audio tokens (Dub-It's sound reference; 25 tokens a second)."""

    frames: int
    height: int
    width: int
    fps: float = 24.0
    stages: tuple[str, ...] = STAGES
    passes: int = 1
    two_stage: bool = False
    window: int | None = None
    images: int = 0
    video_frames: int = 0
    guide_tokens: int = 0
    tiling: TilingConfig | None = TilingConfig()
    video: bool = True
    reference_seconds: float = 0.0
    sampler: str = "euler"  # res_2s: its float64 working tensors too

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
    the upsampler's and the vocoder's widths, the plan's cap on the passes of one forward, and whether sampling and
    the video decode's tiles run here (False: on workers, which meet their own devices' memory; the decoded video
    still comes here)."""

    config: TransformerConfig | None = None
    dtype: torch.dtype = torch.bfloat16
    decoder_channels: int = RELEASED_DECODER_CHANNELS
    diffusion: bool = False
    upsampler_channels: int = RELEASED_UPSAMPLER_CHANNELS
    passes_per_forward: int | None = None
    sampling_here: bool = True
    vocoder_channels: int = RELEASED_VOCODER_CHANNELS
    decoding_here: bool = True

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
    pixels = job.height * job.width
    values = (IMAGE_WIDTHS * job.images + VIDEO_ENCODE_VALUES * job.video_frames) * pixels
    parts = [Part("the video encoder's activations", values * model.value_bytes, True),
             Part("the held video's frames", 2 * FRAME_BYTES * job.video_frames * pixels, False)]
    if job.reference_seconds:  # the audio encoder's mel stages mirror the decoder's (an estimate of the same size)
        parts += [Part("the audio encoder's activations", int(job.reference_seconds * AUDIO_DECODER_VALUES
                                                              * model.value_bytes), True),
                  Part("the reference sound", int(job.reference_seconds * WAVEFORM_BYTES), False)]
    return parts


def _sampling(job: Job, model: ModelSizes) -> list[Part]:
    frames = min(job.frames, job.window or job.frames)
    sizes = [_first_size(job)] + ([(job.height, job.width)] if job.two_stage else [])
    height, width = sizes[-1]
    reference = math.ceil(job.reference_seconds * AUDIO_LATENTS_PER_SECOND)  # appended audio tokens
    tokens = (video_tokens(frames, height, width) if job.video else 0) + audio_latent_length(frames, job.fps) \
        + reference
    parts = [Part("the sampled latent", latent_bytes(job), True, until=KEPT)]
    if model.config is None or not model.sampling_here:
        return parts
    batch = min(job.passes, model.passes_per_forward or job.passes)
    acts = max(activation_bytes(model.config, frames, h if job.video else 0, w if job.video else 0, batch,
                                model.dtype, job.fps) for h, w in sizes)
    acts += batch * job.guide_tokens * model.config.video.width * LIVE_WIDTHS * model.value_bytes  # appended
    acts += batch * reference * model.config.audio.width * LIVE_WIDTHS * model.value_bytes
    parts += [Part(f"activations of {batch} pass{'es' if batch > 1 else ''}", acts, True),
              Part("the sampling state", STATE_VALUES * 4 * LATENT_CHANNELS * tokens, True)]
    if job.sampler == "res_2s":
        parts.append(Part("res_2s's float64 working tensors", RES2S_VALUES * 8 * LATENT_CHANNELS * tokens, True))
    return parts


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
    video = Part("the decoded video", FRAME_BYTES * job.frames * job.height * job.width, False, until="frames")
    if not model.decoding_here:  # decoded on workers: the video arrives in shared memory and is copied out of it
        return parts + [video, video._replace(name="the received video's shared copy", until=None)]
    # the tiles' blocks stay with the allocator (glibc's arenas, CUDA's cache) while the frames are made
    return parts + [Part("a decode tile's activations", decode_tile_bytes(job, model), True, until="frames"), video]


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
