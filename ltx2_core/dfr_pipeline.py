"""DFR's chain of stages (`Request.mode` "dfr"), as ltx-pipelines 1.2.0's `DFRPipeline.__call__`; its checks and
the rounds' bookkeeping are `ltx2_core.dfr`, the canvas and tiles `ltx2_core.dfr_layout`.

* Canvas: the requested N frames padded to N' (segments of 24 or 32 frames), keyframe slots at the segment ends.
* Stage 1: half size, the distilled table with plain Euler steps, no guidance; the images at half size, then the
  slots (`KeyframeSlots`). The distilled LoRA is fused in every stage.
* Stage 2: the video and the slots upsampled ×2 (`stages.upsample`), refined over the stage-2 table with the
  detailing IC-LoRA fused as well (where given); the images at full size, the slots seeded from the upsampled ones,
  and stage 1's half-size video as the IC-LoRA reference (`EncodedControl`, its downscale factor from the LoRA's
  metadata, default 2). The audio is re-noised and sampled for the video's sake; stage 1's audio is what returns.
* Temporal rounds r = 1..R: the video ×2 in time (`stages.upsample_time`), the fps doubled (conditions at most 60
  fps), 2^r tiles over the seams; each tile video only, from its slice of the latent, over the distilled table's
  last four sigmas with ancestral steps (η 0.5, seed + 1000·r + tile), holding its images, the carried keyframes
  (0.95) and new slots seeded from the nearest video frames; stitched; the carried keyframes and the new slots
  carried to the next round.
* Output: (N − 1)·2^R + 1 frames at fps·2^R; stage 1's sound cut to the video's duration.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import torch

from ltx2_core.conditioning.control import EncodedControl
from ltx2_core.conditioning.images import ImageCondition, encode_conditions
from ltx2_core.conditioning.keyframe_slots import CarriedKeyframes, KeyframeSlots
from ltx2_core.dfr import (ANCHOR_STRENGTH, MAX_CONDITIONING_FPS, ROUND_ETA, ROUND_SEED_STEP, carried_keyframes,
                           check_dfr, first_slots, output_frames, slot_seeds, sound_samples, tile_images)
from ltx2_core.dfr_layout import FRAMES_PER_LATENT, canvas, stitch, tiles, to_local
from ltx2_core.loader.lora import Lora, lora_reference_scale
from ltx2_core.model.video_vae.tiling import TilingConfig
from ltx2_core.releases import RELEASES
from ltx2_core.sampling.recipe import StageParts, build_stage
from ltx2_core.sampling.schedules import DISTILLED_SIGMAS, STAGE2_SIGMAS
from ltx2_core.stages import AVLatent, empty_latent, upsample, upsample_time
from ltx2_core.types import TextEmbeddings

ROUND_SIGMAS = DISTILLED_SIGMAS[4:]  # a temporal round's tiles: (0.975, 0.909375, 0.725, 0.421875, 0)


def detailing_downscale(path: str | None) -> int:
    """The detailing IC-LoRA's reference downscale factor: its metadata's, else 2 (the reference's
    `_detailing_downscale_factor`)."""
    scale = lora_reference_scale(path) if path else None
    return 2 if scale is None else scale


class DfrResult(NamedTuple):
    """The chain's output: `latent` (the video latent trimmed to the requested length, stage 1's audio, at the
    output fps) and the generator the stages drew from (the decoder draws from it next)."""

    latent: AVLatent
    generator: torch.Generator


def _stage(version, positive, sigmas, conditions, loras, seed: int, name: str):
    parts = StageParts(sigmas=tuple(sigmas), conditions=conditions, loras=loras, seed=seed, name=name)
    return build_stage(version, parts, positive, None).stage


def sample_dfr(sampler, models, positive: TextEmbeddings, images: Sequence[ImageCondition], width: int, height: int,
               frames: int, fps: float, seed: int, rounds: int, temporal_upsampler=None,
               detailing: tuple[Lora, float] | None = None, downscale: int = 2,
               stage_latents: list[AVLatent] | None = None) -> DfrResult:
    """The chain (module docstring) on `sampler` (a `pipeline.StageSampler`); `models` gives the encoder, upsampler,
    decoders (the latent statistics) and the distilled LoRA; `stage_latents`, when given, gets every stage's and
    tile's sampled latent in the order they ran. Checks are the caller's (`dfr.check_dfr`)."""
    version = sampler.config.version
    padded, _, positions = canvas(frames)
    crf = RELEASES[version].image_crf
    base = ((models.distilled_lora, 1.0),) if models.distilled_lora is not None else ()
    generator = torch.Generator(sampler.device).manual_seed(seed)

    def run(latent: AVLatent, stage) -> AVLatent:
        result = sampler(positive, None, latent, stage, generator)
        if stage_latents is not None:
            stage_latents.append(result)
        return result

    encoder = models.video_encoder
    conditions = [*encode_conditions(images, encoder, height // 2, width // 2, crf), KeyframeSlots(positions)]
    first = run(empty_latent(width // 2, height // 2, padded, fps),
                _stage(version, positive, DISTILLED_SIGMAS, conditions, base, seed, "stage 1"))
    sound = first.audio
    up = upsample(first, models.upsampler, models.decoders)
    conditions = [*encode_conditions(images, encoder, height, width, crf), KeyframeSlots(positions, up.keyframes)]
    loras = base
    if detailing is not None:
        conditions.append(EncodedControl(first.video, 1.0, downscale))
        loras = (*base, detailing)
    latent = run(up._replace(keyframes=None),
                 _stage(version, positive, STAGE2_SIGMAS, conditions, loras, seed, "stage 2"))
    carry_frames, carry = list(positions), latent.keyframes
    video = AVLatent(latent.video, None, fps)
    for round_index in range(1, rounds + 1):
        video = upsample_time(video, temporal_upsampler, models.decoders)
        padded = 2 * (padded - 1) + 1
        seams = [2 * frame for frame in carry_frames]
        seam_index = {seam: index for index, seam in enumerate(seams)}
        layout = tiles(seams, padded, 2 ** round_index)
        tile_fps = min(video.fps, MAX_CONDITIONING_FPS)
        parts, slot_frames, slot_parts = [], [], []
        for index, tile in enumerate(layout):
            part = video.video[:, :, tile.latent_start:tile.latent_stop]
            held = tile_images(images, tile)
            conditions = [*encode_conditions(held, encoder, height, width, crf)] if held else []
            if tile.anchors:
                anchors = torch.cat([carry[:, :, seam_index[f]:seam_index[f] + 1] for f in tile.anchors], dim=2)
                conditions.append(CarriedKeyframes(anchors, tuple(to_local(tile.anchors, tile.pixel_start)),
                                                   ANCHOR_STRENGTH))
            if tile.slots:
                local = to_local(tile.slots, tile.pixel_start)
                conditions.append(KeyframeSlots(local, slot_seeds(part, local)))
            stage = dataclasses.replace(
                _stage(version, positive, ROUND_SIGMAS, conditions, base, seed, f"round {round_index} tile {index}"),
                ancestral_seed=seed + ROUND_SEED_STEP * round_index + index, ancestral_eta=ROUND_ETA)
            result = run(AVLatent(part, None, tile_fps), stage)
            parts.append(result.video)
            if tile.slots:
                slot_frames.extend(tile.slots)
                slot_parts.append(result.keyframes)
        video = video._replace(video=stitch(parts, layout))
        slots = None
        if slot_parts:
            slot_frames, slots = first_slots(slot_frames, torch.cat(slot_parts, dim=2))
        carry_frames, carry = carried_keyframes(seams, carry, slot_frames, slots)
    kept = (output_frames(frames, rounds) - 1) // FRAMES_PER_LATENT + 1
    out_fps = fps * 2 ** rounds
    return DfrResult(AVLatent(video.video[:, :, :kept], sound, out_fps), generator)


def check_dfr_models(request, models, config) -> None:
    """ValueError naming the fix, once the models are known and before any model work: the x2 spatial upsampler,
    the distilled LoRA, the temporal upsampler for rounds, the video encoder for images, the keyframe-slot
    transformer (`dfr.check_dfr`)."""
    if models.upsampler is None or models.upsampler.config.temporal or models.upsampler.config.spatial_scale != 2.0:
        raise ValueError("DFR needs the x2 spatial latent upsampler (ltx-2*-spatial-upscaler-x2-*.safetensors) as "
                         "its upsampler" + ("; the one given is the temporal upsampler: give it as the temporal "
                                            "upsampler" if models.upsampler is not None and
                                            models.upsampler.config.temporal else "; pass it"))
    if models.distilled_lora is None:
        raise ValueError("DFR runs every stage with the distilled LoRA on the keyframe-slot transformer; pass it "
                         "(--distilled-lora)")
    if request.images and models.video_encoder is None:
        raise ValueError("image conditioning needs the video VAE encoder; pass it as Models.video_encoder")
    temporal = getattr(models, "temporal_upsampler", None)
    if temporal is not None and not temporal.config.temporal:
        raise ValueError("DFR's temporal upsampler is a spatial one (it enlarges H and W); give the temporal x2 latent "
                         "upsampler (config temporal_upsample: true) there")
    check_dfr(request.frames, request.dfr.rounds, config, "loaded", None if temporal is None else "loaded")


@torch.no_grad()
def generate_dfr(request, models, *, sampler, tiling: TilingConfig | None = TilingConfig(),
                 positive: TextEmbeddings | None = None, decodes: bool = True, video_decode=None):
    """A `Request` of mode "dfr" end to end (module docstring) on `sampler` (a `pipeline.StageSampler`): the frames
    ((N − 1)·2^R + 1 at fps·2^R) and stage 1's sound cut to them, as a `stages.Generation`. Unless `positive` is
    given, the prompt is encoded here (as it stands: `pipeline.generate` enhances it first where asked); an
    automatic length (`request.auto_frames`) is predicted from the prompt by `models.duration_head` before any noise.
    `decodes` False (a rank of a torchrun launch other than 0): the stages run and None is returned, after this
    rank's share of the video decode where `video_decode` spreads it (`pipeline.Distribution.video_decode`)."""
    from ltx2_core.loader.lora import load_lora
    from ltx2_core.stages import decode, encode

    request.check()
    check_dfr_models(request, models, sampler.config)
    settings = request.dfr
    detailing = None
    if settings.detailing_lora is not None:
        detailing = (load_lora(settings.detailing_lora), float(settings.detailing_strength))
    if positive is None:  # `pipeline.generate` enhanced it first where asked
        positive, _ = encode(models.prompt_encoder, request.prompt)
    if request.auto_frames is not None:  # the length from the prompt, before any noise (the reference's order)
        from ltx2_core.duration import resolve_frames

        request = resolve_frames(request, models.duration_head, positive)
        canvas(request.frames)  # the length chosen lays out on DFR's segments
    result = sample_dfr(sampler, models, positive, request.images, request.width, request.height, request.frames,
                        request.fps, request.seed, settings.rounds, models.temporal_upsampler, detailing,
                        detailing_downscale(settings.detailing_lora))
    if not decodes and video_decode is None:
        return None
    # the decoder's noise continues the stages' generator where both share a device type (`pipeline.generator_on`)
    device = next(models.decoders.video.parameters()).device
    generator = result.generator if result.generator.device.type == device.type else \
        torch.Generator(device).manual_seed(request.seed)
    generation = decode(result.latent, models.decoders, tiling, generator=generator, video_decode=video_decode)
    if generation is None:  # a rank that decoded its share of the tiles
        return None
    samples = sound_samples(generation.waveform.shape[-1], generation.frames.shape[0], generation.fps,
                            generation.sample_rate)
    return generation._replace(waveform=generation.waveform[..., :samples])


def dfr_job(request, tiling: TilingConfig | None, stages: tuple[str, ...]):
    """The memory check's `Job` of a DFR request (`pipeline.request_job`), a bound: the whole padded canvas at the
    output frame rate ((N' − 1)·2^R + 1 frames, a tile is smaller) at full size, no guidance, two stages, guiding
    tokens of the half-size reference and of every slot (one latent frame each, the last round's count)."""
    from ltx2_core.geometry import video_tokens
    from ltx2_core.memory.footprint import Job

    rounds = request.dfr.rounds
    padded, _, positions = canvas(request.frames)
    frames = (padded - 1) * 2 ** rounds + 1
    slots = len(positions) * 2 ** rounds * video_tokens(1, request.height, request.width)
    return Job(frames, request.height, request.width, request.fps * 2 ** rounds, stages, passes=1, two_stage=True,
               images=len(request.images), guide_tokens=video_tokens(padded, request.height // 2,
                                                                     request.width // 2) + slots, tiling=tiling)
