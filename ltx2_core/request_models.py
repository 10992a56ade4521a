"""A request against the models it runs on: `Models` (what a generation runs), stage 1's guidance for a request
(`guidance_for`: the request's or the release defaults) and every check of a request against its models before any
model work (`check_request`: the mode's upsampler and LoRAs, the encoders its conditions need, the STG blocks)."""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import torch

from ltx2_core.duration import check_auto_frames
from ltx2_core.loader.lora import Lora, check_distilled_lora, check_lora
from ltx2_core.model.audio_vae import AudioEncoder
from ltx2_core.model.decoders import Decoders
from ltx2_core.model.duration_head import DurationHead
from ltx2_core.model.text import PromptEncoder
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.model.upsampler import LatentUpsampler
from ltx2_core.model.video_vae import VideoEncoder
from ltx2_core.releases import HQ_PRESET
from ltx2_core.request import Request
from ltx2_core.request_checks import GUIDED_TWO_STAGE, check_stage_models
from ltx2_core.sampling import GuidanceParams
from ltx2_core.sampling.guidance import default_guidance
from ltx2_core.sampling.recipe import held_audio_guidance


class Models(NamedTuple):
    """What a generation runs. `upsampler` is needed by two-stage and distilled, `distilled_lora` by two-stage.
    `transformer` is None when workers hold it (a `StageSampler` then runs the stages)."""

    transformer: LTX2Transformer | None
    prompt_encoder: PromptEncoder
    decoders: Decoders
    upsampler: LatentUpsampler | None = None
    distilled_lora: Lora | None = None
    video_encoder: VideoEncoder | None = None  # encodes the request's images and video
    audio_encoder: AudioEncoder | None = None  # encodes the request's audio
    # IC-LoRAs (LoRA files stating a reference_downscale_factor) with their strengths: fused around the first stage
    # only and restored bit for bit after it, as the reference's ICLoraPipeline refines stage 2 without them
    ic_loras: tuple[tuple[Lora, float], ...] = ()
    duration_head: DurationHead | None = None  # LTX-2.5's clip length from the prompt (`Request.auto_frames`)
    temporal_upsampler: LatentUpsampler | None = None  # DFR's temporal x2 upsampler (its temporal rounds)


def guidance_for(request: Request, config: TransformerConfig) -> tuple[GuidanceParams, GuidanceParams]:
    """The (video, audio) guidance of stage 1: none for distilled, else the request's or the release defaults.
    Text to audio: no video guidance, and the audio's modality scale 1 (no video: ltx-pipelines 1.2.0's T2A). A
    sound held exactly (audio-to-video at strength 1) is not sampled, so its default is no audio guidance, as the
    reference's audio-to-video pipeline (the video's modality guidance still pulls the picture to the sound)."""
    if request.mode in ("distilled", "hdr", "dfr"):
        return GuidanceParams(), GuidanceParams()
    video, audio = default_guidance(config.version, config.num_layers)
    if request.mode == "two-stage-hq":  # the HQ preset's, for every release (no STG: no blocks)
        video, audio = (GuidanceParams(**scales._asdict()) for scales in (HQ_PRESET.video_guidance,
                                                                           HQ_PRESET.audio_guidance))
    if request.audio_only:
        return GuidanceParams(), replace(request.audio_guidance or audio, modality=1.0)
    audio = request.audio_guidance or audio
    return request.video_guidance or video, audio if request.audio is None else held_audio_guidance(
        request.audio.strength, audio)


def check_request(request: Request, models: Models, config: TransformerConfig | None = None) -> None:
    """Every check of a request against the models it will run on, before any model work. `config`: the
    transformer's when it is not in `models` (it runs on workers); the LoRA is then checked on a meta model."""
    request.check()
    config = config or models.transformer.config
    check_auto_frames(request, models.duration_head is not None, config.version.value)
    check_stage_models(request.mode, upsampler=models.upsampler is not None,
                       distilled_lora=models.distilled_lora is not None, one_stage_input=request.one_stage_input)
    if request.two_stage and models.upsampler.config.temporal:  # refused here, not after stage 1
        raise ValueError("the upsampler given is DFR's temporal one (it doubles the frames); the two-stage pipelines "
                         "need the x2 spatial latent upsampler (ltx-2*-spatial-upscaler-x2-*.safetensors)")
    if request.two_stage and models.upsampler.config.spatial_scale != 2.0:
        raise ValueError(f"the two-stage pipelines need a x2 upsampler, got x{models.upsampler.config.spatial_scale}")
    check_stg_blocks(request, config)
    if request.images and models.video_encoder is None:
        raise ValueError("image conditioning needs the video VAE encoder (load_video_encoder of the checkpoint); "
                         "pass it as Models.video_encoder")
    if request.video_input is not None and models.video_encoder is None:
        raise ValueError("sound for a video needs the video VAE encoder (load_video_encoder of the checkpoint, or "
                         "of LTX-2.5's video VAE file); pass it as Models.video_encoder")
    if request.controls and models.video_encoder is None:
        raise ValueError("a control video needs the video VAE encoder (load_video_encoder of the checkpoint, or "
                         "of LTX-2.5's video VAE file); pass it as Models.video_encoder")
    if request.retake is not None and models.video_encoder is None:
        raise ValueError("a retake needs the video VAE encoder (load_video_encoder of the checkpoint, or of "
                         "LTX-2.5's video VAE file); pass it as Models.video_encoder")
    if request.retake is not None and models.audio_encoder is None and request.retake.info().has_sound:
        raise ValueError(f"{request.retake.clip_name} has sound, which the retake holds: it needs the audio VAE encoder "
                         "(load_audio_encoder of the checkpoint, or of LTX-2.5's audio VAE file); pass it as "
                         "Models.audio_encoder")
    if request.dub is not None:
        check_dub_models(models)
    if request.audio is not None and models.audio_encoder is None:
        raise ValueError("audio conditioning needs the audio VAE encoder (load_audio_encoder of the checkpoint, or "
                         "of LTX-2.5's audio VAE file); pass it as Models.audio_encoder")
    loras = [lora for lora, _ in models.ic_loras]
    if models.distilled_lora is not None and request.mode in GUIDED_TWO_STAGE:
        check_distilled_lora(models.distilled_lora, config.gated_attention)
        loras.append(models.distilled_lora)
    for lora in loras:
        check_lora(models.transformer if models.transformer is not None else meta_transformer(config), lora)


def check_dub_models(models: Models) -> None:
    """Dub-It's models: both VAE encoders (the clip's frames and sound) and its one IC-LoRA."""
    if models.video_encoder is None or models.audio_encoder is None:
        raise ValueError("Dub-It encodes the clip's frames and sound: it needs the video and audio VAE encoders "
                         "(load_video_encoder / load_audio_encoder of the checkpoint, or of LTX-2.5's VAE files); pass "
                         "them as Models.video_encoder and Models.audio_encoder")
    if len(models.ic_loras) != 1:
        raise ValueError(f"Dub-It runs with exactly one IC-LoRA, the Dub-It IC-LoRA (a LoRA whose metadata states a "
                         f"reference_downscale_factor), got {len(models.ic_loras)}; load it (--lora on the command "
                         "line) and no other IC-LoRA")


def meta_transformer(config: TransformerConfig) -> LTX2Transformer:
    """The transformer's structure without weights (names and shapes, for checks)."""
    with torch.device("meta"):
        return LTX2Transformer(config)


def check_stg_blocks(request: Request, config: TransformerConfig) -> None:
    blocks = config.num_layers
    for name, params in zip(("video", "audio"), guidance_for(request, config)):
        if any(not 0 <= b < blocks for b in params.stg_blocks):
            raise ValueError(f"{name} STG blocks {list(params.stg_blocks)} are outside this model's blocks "
                             f"0..{blocks - 1}; pick blocks in that range")
