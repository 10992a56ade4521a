"""Text to video + audio, end to end (spec §7): one-stage, two-stage and distilled.

* one-stage: the full-size latent is sampled from noise on the LTX2 schedule with the full multimodal guidance.
* two-stage: the same at half width and height, then the video latent is upsampled ×2, video and audio are
  re-noised to σ = 0.909375 and refined in 3 steps with the distilled LoRA fused and no guidance. LTX-2.5 returns
  stage 1's audio (its reference, ltx-pipelines 1.2.0, refines the audio too, for the video's sake, and discards it;
  1.0.0, which 2.0 and 2.3 follow, returns stage 2's: `Release.two_stage_keeps_stage1_audio`).
* keyframes (Lightricks' `KeyframeInterpolationPipeline`; two-stage with images is their TI2Vid pipeline): the
  two-stage recipe with every image appended as a keyframe in both stages, frame 0 too
  (`ltx2_core.conditioning.keyframes`), and stage 2's audio returned (both references).
* distilled (a distilled checkpoint): stage 1 is 8 steps of the distilled table without guidance (LTX-2.5:
  ancestral Euler steps, fresh noise at each), then as above without a LoRA.
* text to audio (`Request.audio_only`, one-stage only): the audio latent of frames / fps seconds alone, sampled as
  one-stage with the audio guidance (its modality scale 1: no video to guide against) on the transformer run
  audio-only, then decoded by the audio decoder and vocoder only (ltx-pipelines 1.2.0's `t2a_one_stage.py`).

Sound for an existing silent video (`Request.video_input`, video to audio) is one stage at the video's own size,
frame count and frame rate, as the reference's `RetakePipeline` with `regenerate_video=False` on a file without
sound: the video latent is the file's, encoded and frozen (each release as its reference: 1.0.0 for 2.0 and 2.3, 1.2.0
for 2.5; `ltx2_core.conditioning.video`); the audio is sampled from noise over the whole clip.
one-stage: the LTX2 schedule with the release's guidance of both modalities (negative contexts for both);
distilled: the 8-step distilled table, plain Euler steps (also for LTX-2.5), no guidance, no second stage (the
reference's `distilled=True`). two-stage is refused (the reference has no upsampled V2A).

IC-LoRA control (`Request.controls`, the IC-LoRA in `Models.ic_loras`): each control video is encoded at the first
stage's size divided by its LoRA's reference_downscale_factor and appended as guiding tokens after the images
(`ltx2_core.conditioning.control`, with its attention weights where it has an attention strength below 1 or a
mask); as the reference's `ICLoraPipeline` it guides stage 1 only, the IC-LoRA is fused for stage 1 only (the
stage's `loras`, restored bit for bit after it), and stage 2 refines with the images alone and without it. Its
distilled stage 1 takes plain Euler steps, also for LTX-2.5 (1.2.0's `ICLoraPipeline`).
Retake (`Request.retake`): frames [start, end) s of an existing clip regenerated with the prompt (its video and, when
it has sound, its audio; either may be kept whole), the rest held exactly, as the reference's `RetakePipeline`: the
same one stage at the file's size, frames and fps, guided or distilled as above (`ltx2_core.conditioning.retake`).
Dub-It (`Request.dub`, mode distilled, its IC-LoRA in `Models.ic_loras`): as the reference's `DubItPipeline`, the
clip's frames guide both stages as the IC-LoRA control (re-encoded at each stage's size), the IC-LoRA is fused in both
stages, stage 1 (plain Euler steps) appends the clip's encoded sound as audio reference tokens, and stage 2 holds the
audio frozen at stage 1's latent with that latent as its reference; stage 1's audio is returned
(`ltx2_core.conditioning.dub`).

Noise: one generator on the transformer's device seeded with `seed` draws, in this order, the stage-1 video and
audio noise and then the stage-2 video and audio noise, each as `torch.randn((1, tokens, 128))` in the latent dtype,
as the reference pipelines do (text to audio: only the audio's); the same seed gives the same noise as the reference
on the same device. The ancestral steps draw theirs from a second generator seeded with `seed` + 10000
(`sampling.recipe.ANCESTRAL_SEED_OFFSET`).

The defaults of each release (steps, guidance, the negative prompt, ancestral or not) come from `releases.RELEASES`;
each stage is built by `sampling.recipe.build_stage` (the sampler nodes build theirs there too), where the rules of
the release's reference pipelines (`Release.reference`: ltx-pipelines 1.0.0 for 2.0 and 2.3, 1.2.0 for 2.5) are
written once.

NaN or infinite values (damaged weights, a float16 overflow) stop a generation with NonFiniteError naming the stage:
the prompt embeddings, the latents after the last step of each stage and the decoded media are checked once each
(one host read per stage, none inside a step), so nothing non-finite is decoded, returned or written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import NamedTuple

import torch

from ltx2_core.compile import GraphSetting
from ltx2_core.audio_io import Waveform
from ltx2_core.conditioning import Condition, EncodedAudio, EncodedVideo, encode_control, encode_images
from ltx2_core.conditioning.audio_reference import EncodedAudioReference
from ltx2_core.duration import resolve_frames
from ltx2_core.geometry import video_tokens
from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.memory.footprint import STAGES, Job
from ltx2_core.model.video_vae.tiling import TilingConfig
from ltx2_core.sampling.guidance import active_passes
from ltx2_core.sampling.recipe import StageParts, build_stage, guided
from ltx2_core.stages import AVLatent, Generation, decode, empty_audio_latent, empty_latent, encode, upsample
from ltx2_core.sampling.denoise import RunnerFactory
from ltx2_core.stages import VideoDecode
from ltx2_core.releases import HQ_PRESET, RELEASES
from ltx2_core.request import ONE_GPU, Request
from ltx2_core.request_checks import GUIDED_TWO_STAGE
from ltx2_core.request_encoding import (
    Prompts,
    dub_conditions,
    encode_request,
    encode_request_audio,
    encode_request_retake,
    encode_request_video,
    enhance_request,
    generator_on,
)
from ltx2_core.request_models import Models, check_request, check_stg_blocks, guidance_for
from ltx2_core.stage_samplers import LocalSampler, StageSampler
from ltx2_core.types import TextEmbeddings

StageProgress = Callable[[str, int, int], None]  # (stage name, steps done, steps of the stage)


def request_job(request: Request, config: TransformerConfig, tiling: TilingConfig | None = TilingConfig(),
                stages: tuple[str, ...] = STAGES) -> Job:
    """What `request` allocates, as the memory check counts it (`memory.footprint`): its clip, the guidance passes
    of stage 1, its stages (two-stage's ×2), window, frames for the video encoder, the tokens appended (controls,
    keyframes: `Request.image_tokens`) and decode `tiling`. HDR: the clip generated (aligned up to 64, 2N − 1 frames
    in high quality), its video encoded at both stages' sizes and its guiding tokens; counted as a whole-size stage 2
    with audio (more than one tile of video alone: a bound)."""
    if request.mode == "hdr":
        from ltx2_core.hdr_pipeline import hdr_job

        return hdr_job(request, tiling, stages)
    if request.mode == "dfr":
        from ltx2_core.dfr_pipeline import dfr_job

        return dfr_job(request, tiling, stages)
    return Job(request.frames, request.height, request.width, request.fps, stages,
               passes=len(active_passes(*guidance_for(request, config))), two_stage=request.two_stage,
               window=request.windows.window if request.windows is not None else None, images=len(request.images),
               video_frames=request.video_frames, guide_tokens=request.guide_tokens + request.image_tokens,
               tiling=tiling, video=not request.audio_only, reference_seconds=request.reference_seconds,
               sampler=request.stage_sampler)


class Distribution(NamedTuple):
    """How a generation is spread over processes (ltx2_core.parallel makes multi-rank ones); the default: all here.

    runner: builds each step's pass runner (e.g. CFG-parallel); None: every pass in this process.
    prompts: gets the encoded prompts given the function that encodes them (e.g. encode on one rank, broadcast).
    decodes: whether this process decodes and returns the media (one rank does; the others return None).
    video_decode: the video decode every rank takes part in (its tiles spread, `parallel.tiled_decode`); None: only
    the rank that `decodes` decodes, alone.
    """

    runner: RunnerFactory | None = None
    prompts: Callable[[Callable[[], Prompts]], Prompts] = lambda encode_here: encode_here()
    decodes: bool = True
    video_decode: VideoDecode | None = None


SINGLE_PROCESS = Distribution()


@torch.no_grad()
def generate(request: Request, models: Models, progress: StageProgress | None = None, *,
             cuda_graphs: GraphSetting = "auto", passes_per_forward: int | None = None,
             distribution: Distribution = SINGLE_PROCESS, sampler: StageSampler | None = None,
             tiling: TilingConfig = TilingConfig(), prompts: Prompts | None = None) -> Generation | None:
    """Runs one request end to end and returns the decoded frames and waveform. `cuda_graphs` captures each stage's
    step as a CUDA graph on its first step and replays it for the others ("auto": where the step is capturable,
    `LocalSampler`; True: CUDA only). `passes_per_forward` caps how many guidance passes share one forward (None:
    the device's measured policy, `memory.pass_policy`; fewer need less activation memory). `distribution`
    spreads the run over processes (None is returned where it does not decode). `sampler` runs the stages
    elsewhere (e.g. on persistent workers; `models.transformer` may then be None). `tiling`: the video decoder's
    tiles (a memory plan may choose smaller ones). Mode "hdr" returns an `hdr_pipeline.HdrGeneration` (linear
    light; `ltx2_core.hdr_pipeline`). `prompts`: the request's prompts already encoded (as `encode_request` gives
    them; e.g. to predict an automatic length first), else encoded here. Text to audio (`request.audio_only`) runs
    in one process on one device (ValueError otherwise) and returns a `Generation` without frames.
    `request.auto_frames`: the length is predicted by `models.duration_head` once the prompts are encoded, before any
    noise is drawn (`duration.resolve_frames`).

    With `request.video_input` (sound for a video) the frames returned are the frozen video latent decoded, i.e. the
    file's frames through a VAE round trip (as the reference returns them), not the file's own pixels; the waveform
    is the generated sound. With `request.retake` both are the sampled latents decoded, as the reference returns
    them (the kept parts through a VAE round trip)."""
    if request.audio_only and distribution != SINGLE_PROCESS:  # every rank of a parallel run refuses alike
        raise ValueError(ONE_GPU)
    if request.mode == "hdr":  # the HDR IC-LoRA: an `HdrGeneration` (linear light), one process (its float32
        from ltx2_core.hdr_pipeline import generate_hdr  # decode maybe on persistent workers: `decode_hdr`)

        if distribution._replace(video_decode=None) != SINGLE_PROCESS:
            raise ValueError("HDR runs in one process; load the model without parallelism for mode hdr")
        return generate_hdr(request, models, tiling=tiling, sampler=sampler or LocalSampler(
            models.transformer, cuda_graphs=cuda_graphs, passes_per_forward=passes_per_forward),
                            video_decode=distribution.video_decode)
    if request.mode == "dfr":  # DFR's chain (`ltx2_core.dfr_pipeline`): one process
        from ltx2_core.dfr_pipeline import generate_dfr

        # the prompt enhanced where asked (seeing the first image), as the reference's DFR; no negative (no guidance)
        positive = (prompts or distribution.prompts(lambda: encode(
            models.prompt_encoder, enhance_request(request, models.prompt_encoder).prompt)))[0]
        return generate_dfr(request, models, tiling=tiling, sampler=sampler or LocalSampler(
            models.transformer, cuda_graphs=cuda_graphs, passes_per_forward=passes_per_forward,
            runner=distribution.runner, one_gpu=distribution == SINGLE_PROCESS), positive=positive,
                            decodes=distribution.decodes, video_decode=distribution.video_decode)
    sampler = sampler or LocalSampler(models.transformer, cuda_graphs=cuda_graphs,
                                      passes_per_forward=passes_per_forward, runner=distribution.runner,
                                      one_gpu=distribution == SINGLE_PROCESS)
    check_request(request, models, sampler.config)
    if request.long:
        raise ValueError(f"{request.frames} frames span {request.windows.count(request.frames)} windows of "
                         f"{request.windows.window}; generate them with ltx2_core.long_video.generate_long")
    encoder = models.prompt_encoder
    positive, negative = prompts or distribution.prompts(lambda: encode_request(request, encoder, sampler.config))
    request = resolve_frames(request, models.duration_head, positive)  # an automatic length: before any noise
    audio = encode_request_audio(request, models)
    video = encode_request_video(request, models)
    retake = encode_request_retake(request, models)
    latent, generator = sample_request(request, models, positive, negative, progress, sampler=sampler, audio=audio,
                                       video=video, retake=retake)
    if not distribution.decodes and distribution.video_decode is None:
        return None
    return decode(latent, models.decoders, tiling, generator=generator_on(generator, request.seed, models.decoders),
                  video_decode=distribution.video_decode)


@torch.no_grad()
def sample_request(request: Request, models: Models, positive: TextEmbeddings, negative: TextEmbeddings | None,
                   progress: StageProgress | None = None, *, sampler: StageSampler | None = None,
                   audio: tuple[EncodedAudio, Waveform] | None = None,
                   video: EncodedVideo | None = None,
                   retake: tuple[EncodedVideo, EncodedAudio | None] | None = None,
                   held: Sequence[Sequence[Condition]] = (),
                   stage_latents: list[AVLatent] | None = None) -> tuple[AVLatent, torch.Generator]:
    """Every sampling stage of a request (by `sampler`, default: `models.transformer` here) and the x2 upsampling
    between them (here): the final latent and the generator, whose state the decoder's noise continues from.
    `audio`: the request's sound as `encode_request_audio` gives it (None: encoded here when the request has one);
    it is held in every stage. `video`: the request's video as `encode_request_video` gives it (None: encoded here
    when the request has one); held (frozen at strength 1) in its one stage. `retake`: the request's retake as
    `encode_request_retake` gives it (None: encoded here when the request has one), held outside its span.
    `held`: more conditions per stage (stage 1's, stage 2's; a long video's window holds the previous window's last
    frames of that stage, `ltx2_core.long_video`). `stage_latents`: when given, each stage's sampled latent is
    appended to it (what the next window holds)."""
    sampler = sampler or LocalSampler(models.transformer)
    if audio is None:
        audio = encode_request_audio(request, models)
    if video is None:
        video = encode_request_video(request, models)
    if retake is None:
        retake = encode_request_retake(request, models)
    kept = ((audio[0],) if audio is not None else ()) + ((video,) if video is not None else ())
    kept += tuple(c for c in retake or () if c is not None)
    video_guidance, audio_guidance = guidance_for(request, sampler.config)
    generator = torch.Generator(sampler.device).manual_seed(request.seed)
    scale = 2 if request.two_stage else 1
    if request.audio_only:
        latent = empty_audio_latent(request.frames, request.fps)
    else:
        latent = empty_latent(request.width // scale, request.height // scale, request.frames, request.fps)
    latent = latent._replace(sound=audio[1] if audio is not None else None)  # kept by the stages that hold it
    # the images at each stage's size (the reference re-reads and re-encodes them at full size for stage 2)
    crf = RELEASES[sampler.config.version].image_crf  # for the images that leave their CRF to the release
    keyframes = request.mode == "keyframes"  # every image appended as a keyframe, in both stages
    conditions = [*encode_images(request.images, models.video_encoder, request.height // scale,
                                 request.width // scale, crf, keyframes), *kept,
                  *(encode_control(control, models.video_encoder, request.frames, *request.control_size())
                    for control in request.controls),  # appended after the images, as the reference
                  *dub_conditions(request, models, request.height // scale, request.width // scale),
                  *(held[0] if held else ())]
    hq = request.mode == "two-stage-hq"
    first_loras = (*models.ic_loras, *(((models.distilled_lora, HQ_PRESET.lora_strengths[0]),) if hq else ()))
    parts = StageParts("distilled" if request.mode == "distilled" else "ltx2",
                       request.steps or (HQ_PRESET.steps if hq else None),
                       video_guidance=None if request.audio_only else video_guidance, audio_guidance=audio_guidance,
                       conditions=conditions, loras=first_loras, seed=request.seed,
                       name="stage 1" if scale == 2 else "denoise", cache=request.cache,
                       sampler=request.stage_sampler, tokens=hq_tokens(request) if hq else None)
    first = build_stage(sampler.config.version, parts, positive, negative)
    latent = sampler(positive, first.negative, latent, first.stage, generator,
                     progress=_stage(progress, first.stage.name))
    if stage_latents is not None:
        stage_latents.append(latent)
    if request.two_stage:
        latent = upsample(latent, models.upsampler, models.decoders)
        strength = HQ_PRESET.lora_strengths[1] if hq else 1.0
        loras = ((models.distilled_lora, strength),) if request.mode in GUIDED_TWO_STAGE else ()
        conditions = [*encode_images(request.images, models.video_encoder, request.height, request.width, crf,
                                     keyframes), *kept, *(held[1] if len(held) > 1 else ())]
        if request.dub is not None:  # the IC-LoRA again, the clip at full size, the audio held at stage 1's
            loras = models.ic_loras
            conditions += [*dub_conditions(request, models, request.height, request.width, sound=False),
                           EncodedAudio(latent.audio, 1.0), EncodedAudioReference(latent.audio)]
        parts = StageParts("stage-2 refine", loras=loras, conditions=conditions, seed=request.seed,
                           after_guided=guided(first.stage), name="stage 2", cache=request.cache,
                           sampler=request.stage_sampler)
        second = build_stage(sampler.config.version, parts, positive, None)
        if request.dub is not None:  # the reference returns stage 1's audio latent itself
            second = second._replace(stage=replace(second.stage, keep_audio=True))
        latent = sampler(positive, None, latent, second.stage, generator, progress=_stage(progress, "stage 2"))
        if stage_latents is not None:
            stage_latents.append(latent)
    return latent, generator


def hq_tokens(request: Request) -> int:
    """The HQ stage 1 schedule's token count: its half-size latent's F'·H'·W' (`TI2VidTwoStagesHQPipeline` shifts
    the LTX2 schedule by its empty latent, where the other pipelines use 4096)."""
    return video_tokens(request.frames, request.height // 2, request.width // 2)


def _stage(progress: StageProgress | None, name: str) -> Callable[[int, int], None] | None:
    if progress is None:
        return None
    return lambda done, total: progress(name, done, total)


# the models and their checks, the samplers and the request's encoding live in request_models, stage_samplers and
# request_encoding; the nodes, bench and tests import them from here too
__all__ = ["SINGLE_PROCESS", "Distribution", "Generation", "LocalSampler", "Models", "Prompts", "Request",
           "StageProgress", "StageSampler", "check_request", "check_stg_blocks", "decode", "encode", "encode_request",
           "encode_request_audio", "encode_request_retake", "encode_request_video", "enhance_request", "generate",
           "generator_on", "guidance_for", "request_job", "sample_request"]
