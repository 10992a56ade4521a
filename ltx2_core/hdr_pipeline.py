"""HDR video from an SDR video with the HDR IC-LoRA (`Request.mode` "hdr"), as ltx-pipelines 1.2.0's
`HDRICLoraPipeline.__call__`: two stages on the video stream alone (no audio), the LoRA fused in both.

* Size: width and height aligned up to multiples of 64 (the reference's reflect-pad alignment); the decoded frames
  are cropped back to the size asked for. High quality: 2N − 1 frames are generated, from each input frame twice,
  and every other output frame is kept.
* The reference video: its first N frames (high quality: (N + 1) // 2, each repeated), Rec.709 SDR, fitted inside
  each stage's size / the LoRA's reference_downscale_factor and reflect-padded (`video_io.read_video(reflect_pad)`),
  encoded by the video VAE and appended as IC-LoRA guiding tokens (`EncodedControl`) at the request's strength.
* Stage 1: half size, the distilled table, plain Euler steps, no guidance. Stage 2: the latent upsampled ×2, then
  refined over sigmas (0.909375, 0.725, 0) in 2×2×2 tiles (`tiled_stage.refine_tiled`: overlaps 8, 6, 6 latent
  cells; tile i's noise from seed + i), the reference re-encoded at full size and cut to each tile.
* Decoding in fp32 (here, or across persistent workers: `decode_hdr`), then the LoRA's curve to scene-linear
  Rec.709 light (`hdr.Transfer.to_linear`), crop, and (high quality) every other frame: `HdrGeneration.linear`,
  (F, H, W, 3) fp32 ≥ 0.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import torch

from ltx2_core.conditioning.control import EncodedControl
from ltx2_core.hdr import HDR, HdrConfig, Transfer, hdr_config, srgb_preview
from ltx2_core.loader.lora import Lora, fused_loras
from ltx2_core.loader.safetensors_file import read_header
from ltx2_core.media import video_to_frames, write_mp4
from ltx2_core.model.decoders import Decoders
from ltx2_core.model.float32 import in_float32
from ltx2_core.model.video_vae.tiling import TilingConfig, decode_video
from ltx2_core.sampling.recipe import StageParts, build_stage
from ltx2_core.sampling.tiles import HDR_STAGE2_TILES, TileLayout
from ltx2_core.stages import AVLatent, VideoDecode, empty_video_latent, encode, upsample
from ltx2_core.tiled_stage import refine_tiled
from ltx2_core.types import TextEmbeddings
from ltx2_core.video_io import read_video, video_info

ALIGN = 64  # the generated size: multiples of this (two stages of 32)
HDR_STAGE2_SIGMAS = (0.909375, 0.725, 0.0)  # the reference's one stage-2 phase: two steps of the refine table


class HdrGeneration(NamedTuple):
    """linear: (F, H, W, 3) fp32 scene-linear Rec.709 light ≥ 0 on the CPU, at `fps`."""

    linear: torch.Tensor
    fps: float

    def preview(self) -> torch.Tensor:
        """Display sRGB frames (F, H, W, 3) in [0, 1] at exposure 0 (ComfyUI IMAGE)."""
        return srgb_preview(self.linear)

    def save(self, folder: str | os.PathLike, *, half: bool = True, preview: str | None = "preview.mp4"
             ) -> list[Path]:
        """`folder`/frame_00000.exr ... (half float, ZIP) and the sRGB preview mp4 beside them (None: none)."""
        from ltx2_core.exr import write_exr_sequence

        paths = write_exr_sequence(self.linear, folder, half=half)
        if preview is not None:
            paths.append(Path(write_mp4(Path(folder) / preview, self.preview(), self.fps)))
        return paths


def generation_size(width: int, height: int) -> tuple[int, int]:
    """(width, height) aligned up to multiples of 64: the size generated before the crop."""
    return -(-width // ALIGN) * ALIGN, -(-height // ALIGN) * ALIGN


def check_hdr(hdr: HDR, width: int, height: int, frames: int, downscale: int) -> None:
    """ValueError naming the fix before any model work: a size under 64, a strength outside [0, 1], a size the
    LoRA's downscale factor cannot divide, a video shorter than the clip."""
    if min(width, height) < ALIGN:
        raise ValueError(f"HDR: {width}x{height} is below the HDR IC-LoRA's smallest size, {ALIGN}x{ALIGN}; "
                         f"choose width and height of at least {ALIGN}")
    if isinstance(hdr.strength, bool) or not isinstance(hdr.strength, (int, float)) or not 0 <= hdr.strength <= 1:
        raise ValueError(f"HDR: the strength must be in [0, 1] (1 keeps the video's tokens clean), got "
                         f"{hdr.strength!r}")
    gen_w, gen_h = generation_size(width, height)
    if (gen_w // 2) % (32 * downscale) or (gen_h // 2) % (32 * downscale):
        raise ValueError(f"HDR: the LoRA's reference_downscale_factor {downscale} does not divide the first stage's "
                         f"{gen_w // 2}x{gen_h // 2} into multiples of 32; choose a size whose multiple of 64 is a "
                         f"multiple of {64 * downscale}")
    needed = (frames + 1) // 2 if hdr.high_quality else frames
    info = video_info(hdr.video)
    if info.frames < needed:
        raise ValueError(f"HDR: {hdr.name} has {info.frames} frames and the clip needs {needed}; give a longer video "
                         f"or generate {max(1, (info.frames - 1) // 8 * 8 + 1)} frames")


def find_hdr_lora(loras: tuple[tuple[Lora, float], ...]) -> HdrConfig:
    """The HDR settings of the loaded LoRAs (the first file stating them); ValueError naming the fix where none
    does."""
    for lora, _ in loras:
        if lora.path is not None:
            config = hdr_config(read_header(lora.path, "LoRA").metadata, f"LoRA {lora.name}")
            if config is not None:
                return config
    names = ", ".join(lora.name for lora, _ in loras) or "none"
    raise ValueError(f"HDR needs the HDR IC-LoRA (its metadata states hdr_transform); the LoRAs loaded ({names}) "
                     "state none: load the HDR IC-LoRA with --lora (or the LoRA loader)")


@torch.no_grad()
def encode_reference(hdr: HDR, encoder: torch.nn.Module, frames: int, height: int, width: int,
                     downscale: int) -> EncodedControl:
    """The video's guiding tokens for a stage of height × width and `frames` frames (module docstring)."""
    param = next(encoder.parameters())
    count = (frames + 1) // 2 if hdr.high_quality else frames
    pixels = read_video(hdr.video, height // downscale, width // downscale, frames=count, reflect_pad=True,
                        device=param.device, dtype=param.dtype)
    if hdr.high_quality:
        pixels = pixels.repeat_interleave(2, dim=2)[:, :, :frames]
    return EncodedControl(encoder(pixels), float(hdr.strength), downscale)


def hdr_linear(frames: torch.Tensor, transfer: Transfer, size: tuple[int, int] | None, high_quality: bool
               ) -> torch.Tensor:
    """Decoded frames (F, H, W, 3) in [0, 1] -> linear light, cropped to `size` (width, height) and (high quality)
    every other frame."""
    linear = transfer.to_linear(frames)
    if size is not None:
        linear = linear[:, : size[1], : size[0]]
    return linear[::2] if high_quality else linear


def check_float32_decode(video_decode: VideoDecode | None) -> None:
    """ValueError naming the fix for a `video_decode` that does not decode in float32 (its `float32` attribute)."""
    if video_decode is not None and not getattr(video_decode, "float32", False):
        raise ValueError("HDR decodes in float32 and the video_decode given does not: wrap it with "
                         "ltx2_core.runtime.float32_decode.float32_decode, or decode here (no video_decode)")


@torch.no_grad()
def decode_hdr(latent: AVLatent, decoders: Decoders, transfer: Transfer, size: tuple[int, int] | None,
               high_quality: bool, tiling: TilingConfig | None = TilingConfig(),
               generator: torch.Generator | None = None, video_decode: VideoDecode | None = None) -> torch.Tensor:
    """The video latent decoded in fp32 (the decoder's floating tensors cast for the call and each put back in its
    own dtype after it, `model.float32.in_float32`), then `hdr_linear`. `video_decode`: a decode that runs in float32
    elsewhere, given this decoder in its own dtype (`runtime.float32_decode.float32_decode`: the tiles across the
    workers, each casting its own copy of the decoder); None: here."""
    decoder = decoders.video
    if video_decode is not None:
        check_float32_decode(video_decode)
        video = video_decode(latent.video.float(), decoder, tiling, generator=generator, output_device="cpu")
    else:
        with in_float32(decoder):
            video = decode_video(latent.video.float().to(next(decoder.parameters()).device), decoder, tiling,
                                 generator=generator, output_device="cpu")
    return hdr_linear(video_to_frames(video)[0], transfer, size, high_quality)


def sample_hdr(sampler, models, hdr: HDR, positive: TextEmbeddings, width: int, height: int, frames: int,
               fps: float, seed: int, config: HdrConfig, layout: TileLayout = HDR_STAGE2_TILES,
               stage_latents: list[AVLatent] | None = None) -> tuple[AVLatent, torch.Generator]:
    """Both stages (module docstring): the final video-only latent at the aligned size and the generator."""
    gen_frames = 2 * frames - 1 if hdr.high_quality else frames
    gen_w, gen_h = generation_size(width, height)
    version, loras = sampler.config.version, models.ic_loras
    generator = torch.Generator(sampler.device).manual_seed(seed)
    first = encode_reference(hdr, models.video_encoder, gen_frames, gen_h // 2, gen_w // 2, config.downscale)
    stage = build_stage(version, StageParts("distilled", conditions=[first], loras=loras, seed=seed,
                                            name="stage 1"), positive, None).stage
    latent = sampler(positive, None, empty_video_latent(gen_w // 2, gen_h // 2, gen_frames, fps), stage, generator)
    if stage_latents is not None:
        stage_latents.append(latent)
    latent = upsample(latent, models.upsampler, models.decoders)
    second = encode_reference(hdr, models.video_encoder, gen_frames, gen_h, gen_w, config.downscale)
    stage = build_stage(version, StageParts(sigmas=HDR_STAGE2_SIGMAS, conditions=[second], loras=loras, seed=seed,
                                            name="stage 2"), positive, None).stage
    model = getattr(sampler, "model", None)
    fuse_once = model is not None and bool(loras)  # here: fused once around every tile, not once per tile
    with fused_loras(model, loras) if fuse_once else contextlib.nullcontext():
        tile_stage = replace(stage, loras=()) if fuse_once else stage
        latent = refine_tiled(lambda part, s, g: sampler(positive, None, part, s, g), latent, layout, tile_stage,
                              seed, sampler.device)
    if stage_latents is not None:
        stage_latents.append(latent)
    return latent, generator


def check_hdr_models(models) -> HdrConfig:
    """The HDR settings of the loaded HDR IC-LoRA, once the models can run HDR; ValueError naming the fix."""
    if models.upsampler is None or models.upsampler.config.spatial_scale != 2.0:
        raise ValueError("HDR needs the x2 spatial latent upsampler (ltx-2*-spatial-upscaler-x2-*.safetensors); "
                         "pass it")
    if models.video_encoder is None:
        raise ValueError("HDR needs the video VAE encoder for its SDR video (load_video_encoder of the checkpoint, "
                         "or of the conv video VAE file); pass it as Models.video_encoder")
    return find_hdr_lora(models.ic_loras)


@torch.no_grad()
def generate_hdr(request, models, *, sampler=None, tiling: TilingConfig | None = TilingConfig(),
                 positive: TextEmbeddings | None = None, video_decode: VideoDecode | None = None) -> HdrGeneration:
    """A `Request` of mode "hdr" end to end (module docstring): the prompt encoded (or `positive`, e.g. the
    reference's text-embeddings file), both stages on `sampler` (a `pipeline.StageSampler`; `pipeline.generate`
    makes a `LocalSampler`), the fp32 decode to linear light (here, or by `video_decode`: `decode_hdr`). Every
    check before any model work."""
    request.check()
    config = check_hdr_models(models)
    check_hdr(request.hdr, request.width, request.height, request.frames, config.downscale)
    check_float32_decode(video_decode)
    if sampler is None:
        raise ValueError("generate_hdr samples on the `sampler` it is given; call pipeline.generate, which makes one")
    if positive is None:
        positive, _ = encode(models.prompt_encoder, request.prompt)
    latent, generator = sample_hdr(sampler, models, request.hdr, positive, request.width, request.height,
                                   request.frames, request.fps, request.seed, config)
    gen_w, gen_h = generation_size(request.width, request.height)
    size = None if (gen_w, gen_h) == (request.width, request.height) else (request.width, request.height)
    linear = decode_hdr(latent, models.decoders, config.transfer, size, request.hdr.high_quality, tiling, generator,
                        video_decode)
    return HdrGeneration(linear, request.fps)


def hdr_job(request, tiling: TilingConfig | None, stages: tuple[str, ...]):
    """The memory check's `Job` of an HDR request (`pipeline.request_job`): the generated clip, no guidance, two
    stages, the video encoded at both sizes, stage 1's guiding tokens (1/downscale taken as 1: a bound)."""
    from ltx2_core.geometry import video_tokens
    from ltx2_core.memory.footprint import Job

    frames = 2 * request.frames - 1 if request.hdr.high_quality else request.frames
    gen_w, gen_h = generation_size(request.width, request.height)
    return Job(frames, gen_h, gen_w, request.fps, stages, passes=1, two_stage=True, video_frames=2 * frames,
               guide_tokens=video_tokens(frames, gen_h // 2, gen_w // 2), tiling=tiling)


__all__ = ["ALIGN", "HDR", "HDR_STAGE2_SIGMAS", "HdrGeneration", "check_float32_decode", "check_hdr",
           "check_hdr_models", "decode_hdr",
           "encode_reference", "find_hdr_lora", "generate_hdr", "generation_size", "hdr_job", "hdr_linear",
           "sample_hdr"]
