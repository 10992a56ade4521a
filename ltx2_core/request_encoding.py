"""A request's inputs encoded before sampling: its prompts in one batched pass, enhanced first when it asks
(`encode_request`, `enhance_request`), its sound, video and retake encoded for its clip (`encode_request_audio`,
`encode_request_video`, `encode_request_retake`), Dub-It's conditions of a stage (`dub_conditions`), and the
generator the decoder's noise continues from (`generator_on`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from ltx2_core.audio_io import Waveform
from ltx2_core.conditioning import (
    Condition,
    EncodedAudio,
    EncodedVideo,
    encode_audio_condition,
    encode_control,
    encode_video_condition,
)
from ltx2_core.conditioning.dub import encode_dub_sound
from ltx2_core.conditioning.retake import encode_retake
from ltx2_core.geometry import audio_latent_length
from ltx2_core.model.decoders import Decoders
from ltx2_core.model.text import PromptEncoder
from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.releases import RELEASES
from ltx2_core.request import Request
from ltx2_core.request_models import Models, guidance_for
from ltx2_core.stages import encode
from ltx2_core.types import TextEmbeddings


Prompts = tuple[TextEmbeddings, TextEmbeddings | None]


def encode_request_audio(request: Request, models: Models) -> tuple[EncodedAudio, Waveform] | None:
    """The request's sound encoded for its clip, and the clip's waveform (what the video is written with); None
    without audio conditioning."""
    if request.audio is None:
        return None
    return encode_audio_condition(request.audio, models.audio_encoder, request.seconds,
                                  audio_latent_length(request.frames, request.fps))


def encode_request_video(request: Request, models: Models) -> EncodedVideo | None:
    """The request's video encoded at its size (the file's; sound for a video), or None without one."""
    if request.video_input is None:
        return None
    return encode_video_condition(request.video_input, models.video_encoder, request.frames, request.height,
                                  request.width)


def encode_request_retake(request: Request, models: Models) -> tuple[EncodedVideo, EncodedAudio | None] | None:
    """The retake's video and sound encoded, each held outside the span (or whole when kept); None without one."""
    if request.retake is None:
        return None
    info = request.retake.info()
    return encode_retake(request.retake, models.video_encoder, models.audio_encoder, info)


def generator_on(generator: torch.Generator, seed: int, decoders: Decoders) -> torch.Generator:
    """The sampling generator for the decoder's noise when both share a device type (so the noise continues as in
    one process); else a new one on the decoder's device seeded with `seed`."""
    device = next(decoders.video.parameters()).device
    if generator.device.type == device.type:
        return generator
    return torch.Generator(device).manual_seed(seed)


def enhance_request(request: Request, encoder: PromptEncoder) -> Request:
    """The request with its prompt enhanced by the encoder's Gemma (seeded by the request's seed, seeing the first
    image, as the reference's pipelines pass `images[0]`) when it asks for it (`enhance_prompt`, then cleared), else
    the request itself."""
    if not request.enhance_prompt:
        return request
    from ltx2_core.conditioning.images import read_image
    from ltx2_core.model.text.enhance import enhance_prompt

    image = None
    if request.images:
        first = request.images[0].image
        image = first if isinstance(first, np.ndarray) else read_image(first)
    text = enhance_prompt(encoder, request.prompt, seed=request.seed, image=image,
                          system_prompt_file=request.system_prompt).text
    return replace(request, prompt=text or request.prompt, enhance_prompt=False)


def encode_request(request: Request, encoder: PromptEncoder, config: TransformerConfig) -> Prompts:
    """The request's prompts in one batched pass (the positive enhanced first when the request asks); no negative
    when no modality uses CFG."""
    request = enhance_request(request, encoder)
    video_guidance, audio_guidance = guidance_for(request, config)
    guided = video_guidance.cfg != 1 or audio_guidance.cfg != 1
    negative = RELEASES[config.version].negative_prompt if request.negative_prompt is None else request.negative_prompt
    return encode(encoder, request.prompt, negative if guided else None)


def dub_conditions(request: Request, models: Models, height: int, width: int,
                   sound: bool = True) -> list[Condition]:
    """Dub-It's conditions of a stage of height × width: the clip as the IC-LoRA control at that size, then (stage 1,
    `sound`) its encoded sound as audio reference tokens; none without a dub."""
    if request.dub is None:
        return []
    control = encode_control(request.dub.control(), models.video_encoder, request.frames, height, width)
    return [control, encode_dub_sound(request.dub, models.audio_encoder)] if sound else [control]
