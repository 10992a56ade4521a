"""The stages of a generation as separate calls (what the pipelines chain and the ComfyUI nodes wire): an empty
latent, sampling (noise, then the sync-free guided loop), ×2 upsampling, and decoding to frames and a waveform.

A clip's latent is an `AVLatent`: video (B, 128, F', H/32, W/32) and audio (B, 8, T, 16), normalised, with its
frame rate. Noise comes from the caller's generator, video first and then audio, as `torch.randn((1, tokens, 128))`
in the model's dtype on its device: chaining stages on one generator reproduces the reference pipelines' noise.
Text to audio: an `AVLatent` without video (`empty_audio_latent`, video None) is sampled as the audio stream alone
(only the audio noise is drawn, as ltx-pipelines 1.2.0's T2A draws it) and decodes to a waveform without frames.
Video only: an `AVLatent` without audio (`empty_video_latent`, audio None; the HDR IC-LoRA's) is sampled as the
video stream alone (only the video noise is drawn; the transformer runs without its audio stream, as the
reference's stage called without `audio=`) and decodes to frames without sound (an empty waveform).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

import torch

from ltx2_core.audio_io import Waveform
from ltx2_core.compile import CudaGraphStep
from ltx2_core.conditioning import AUDIO, ConditionedStream, condition_audio, condition_video, holds_sound
from ltx2_core.conditioning.keyframe_slots import require_keyframe_embedding
from ltx2_core.finite import DECODING_CAUSES, PROMPT_CAUSES, SAMPLING_CAUSES, check_finite
from ltx2_core.geometry import (
    audio_latent_length,
    audio_positions,
    check_video_size,
    is_frame_count,
    latent_shape,
    patchify_audio,
    patchify_video,
    pixel_size,
    unpatchify_audio,
    unpatchify_video,
    video_positions,
)
from ltx2_core.media import video_to_frames, write_mp4
from ltx2_core.memory.offload import visiting_device
from ltx2_core.model.audio_vae import decode_audio
from ltx2_core.model.text import PromptEncoder
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.model.upsampler import LatentUpsampler, upsample_latent
from ltx2_core.model.video_vae.tiling import TilingConfig, decode_video
from ltx2_core.sampling import denoise, guided_setup, guided_step, noised_state
from ltx2_core.sampling.cache import cached_runner
from ltx2_core.sampling.steps import StreamState, noised_from
from ltx2_core.sampling.denoise import AncestralStep, Observer, Progress, RunnerFactory, Step
from ltx2_core.sampling.res2s import RES2S_STEP_SEED, RES2S_SUBSTEP_SEED, Res2sStep, res2s_plan
from ltx2_core.sampling.stage import Stage
from ltx2_core.model.decoders import Decoders
from ltx2_core.releases import RELEASES, Release
from ltx2_core.types import TextEmbeddings

AUDIO_CHANNELS, MEL_BINS = 8, 16
# `decode_video`'s call (latent, decoder, tiling, *, generator, output_device) -> the video, or None on a rank that
# does not hold it (`ltx2_core.parallel.tiled_decode.SpreadDecode`)
VideoDecode = Callable[..., 'torch.Tensor | None']


class AVLatent(NamedTuple):
    """A clip's joint latent: video (B, 128, F', H', W'), audio (B, 8, T, 16), normalised; `fps` of the clip.
    `video` None: an audio-only latent (text to audio); `audio` None: a video-only latent (HDR IC-LoRA). `sound`:
    the clip of the sound whose encoding the audio latent holds exactly (audio-to-video), which decoding returns
    instead of a re-decoded copy; None for a generated audio latent. `keyframes`: (B, 128, K, H', W') the denoised
    content of a stage's generated keyframe slots (`conditioning.keyframe_slots`, DFR), one latent frame per slot;
    None without slots."""

    video: torch.Tensor | None
    audio: torch.Tensor | None
    fps: float
    sound: Waveform | None = None
    keyframes: torch.Tensor | None = None

    @property
    def pixel_size(self) -> tuple[int, int, int]:
        """(frames, height, width) of the video it decodes to."""
        if self.video is None:
            raise ValueError("an audio-only latent has no video size")
        frames, rows, cols = self.video.shape[2:]
        return pixel_size(frames, rows, cols)


AUDIO_SUFFIXES = (".wav", ".flac", ".m4a", ".mp4")  # what an audio-only generation saves as


class Generation(NamedTuple):
    """frames (F, H, W, 3) float32 in [0, 1] on the CPU, or None for an audio-only generation (text to audio);
    waveform (channels, samples) float32 in [−1, 1] on the CPU at `sample_rate` Hz: the decoded stereo, or the
    conditioning sound (mono or stereo, its own rate)."""

    frames: torch.Tensor | None
    waveform: torch.Tensor
    sample_rate: int
    fps: float

    def save(self, path: str | os.PathLike) -> str:
        """Writes an H.264 + AAC stereo mp4 (atomically); returns its path. Audio only (frames None): the waveform
        alone as .wav, .flac, .m4a or .mp4 (by the path's suffix)."""
        if self.frames is not None:
            silent = self.waveform.numel() == 0  # a video-only generation
            return str(write_mp4(path, self.frames, self.fps, None if silent else self.waveform,
                                 None if silent else self.sample_rate))
        if not str(path).lower().endswith(AUDIO_SUFFIXES):
            raise ValueError(f"an audio-only generation is saved as {', '.join(AUDIO_SUFFIXES)}, got {str(path)!r}; "
                             "change the file name's suffix")
        from ltx2_core.media import write_audio  # the audio writer of issue 24's audio file I/O

        return str(write_audio(path, self.waveform, self.sample_rate))


def encode(encoder: PromptEncoder, prompt: str, negative_prompt: str | None = None
           ) -> tuple[TextEmbeddings, TextEmbeddings | None]:
    """Both prompts in one batched pass (no negative: None), checked once for NaN/inf."""
    positive, negative = encoder.encode(prompt, negative_prompt)
    prompts = {"positive": positive} | ({"negative": negative} if negative is not None else {})
    contexts = {f"{name} prompt's {stream} context": getattr(embeddings, stream)
                for name, embeddings in prompts.items() for stream in ("video", "audio")}
    check_finite("prompt encoding", contexts, PROMPT_CAUSES, "Nothing was sampled or written.")
    return positive, negative


def empty_latent(width: int, height: int, frames: int, fps: float, batch: int = 1) -> AVLatent:
    """Zeros of the size of a clip (width × height pixels, `frames` = 8k+1 at `fps`), on the CPU in fp32."""
    check_video_size(frames, height, width)
    if not fps > 0:
        raise ValueError(f"fps must be a positive number, got {fps!r}")
    video = torch.zeros(batch, 128, *latent_shape(frames, height, width))
    audio = torch.zeros(batch, AUDIO_CHANNELS, audio_latent_length(frames, fps), MEL_BINS)
    return AVLatent(video, audio, float(fps))


def empty_video_latent(width: int, height: int, frames: int, fps: float, batch: int = 1) -> AVLatent:
    """Zeros of the video of a clip and no audio, on the CPU in fp32: what a video-only stage samples."""
    return empty_latent(width, height, frames, fps, batch)._replace(audio=None)


def empty_audio_latent(frames: int, fps: float, batch: int = 1) -> AVLatent:
    """Zeros of the audio of a clip of `frames` (8k+1) at `fps` (its duration, frames / fps seconds) and no video,
    on the CPU in fp32: what text to audio samples."""
    if isinstance(frames, bool) or not isinstance(frames, int) or not is_frame_count(frames):
        raise ValueError(f"frames must be 8k+1 (the clip's duration is frames / fps), got {frames!r}; e.g. 121 "
                         "frames at 24 fps for 5 seconds")
    if not fps > 0:
        raise ValueError(f"fps must be a positive number, got {fps!r}")
    return AVLatent(None, torch.zeros(batch, AUDIO_CHANNELS, audio_latent_length(frames, fps), MEL_BINS), float(fps))


def sample(model: LTX2Transformer, positive: TextEmbeddings, negative: TextEmbeddings | None, latent: AVLatent,
           stage: Stage, generator: torch.Generator, *, step: Step = guided_step, progress: Progress | None = None,
           observe: Observer | None = None, passes_per_forward: int | None = None,
           runner: RunnerFactory | None = None, should_stop: Callable[[], bool] | None = None) -> AVLatent:
    """Noises `latent` to `stage.noise_scale` (1: pure noise; the first sigma when refining) and denoises it over
    `stage.sigmas` with the stage's guidance and conditions (each applied to the state of its stream,
    `ltx2_core.conditioning`) in the guided loop (`progress` and `observe` as in `denoise`; `runner` builds the
    pass runner, e.g. CFG-parallel); a stage with an `ancestral_seed` takes ancestral steps instead of `step`, one
    with sampler res_2s res_2s steps (`res2s_step`).
    An audio-only latent (video None) samples the audio alone: only its noise is drawn, the video guidance is
    unused, and `observe` is not called (previews draw the video).
    The video stream's attention weights (a weighted IC-LoRA control's) become the video self-attention's log
    bias for the run (`attention_weights`); an audio stream's are refused.
    The model is sampled as it is: its owner fuses `stage.loras` around this call
    (`pipeline.LocalSampler`). One NaN/inf check after the last step (NonFiniteError naming the stage).
    `should_stop` (a host flag) is read before every step and, unless the step replays a captured CUDA graph,
    before every transformer block: True raises `errors.Interrupted` there."""
    if stage.loras:
        raise ValueError(f"{stage.name}: stages.sample does not fuse LoRAs; sample with pipeline.LocalSampler, "
                         "or fuse them around this call with loader.lora.fused_loras")
    param = model.scale_shift_table  # never quantised: the compute device and dtype (any linear may be fp8)
    release = RELEASES[model.config.version]
    audio = own_audio = video = own_video = None
    if latent.audio is not None:
        own_audio = patchify_audio(latent.audio).to(device=param.device, dtype=param.dtype)
        audio = condition_audio(own_audio, audio_positions(latent.audio.shape[2]), stage.conditions, latent.fps)
    else:
        check_video_only(latent, stage)
    if latent.video is not None:
        frames, rows, cols = latent.video.shape[2:]
        own_video = patchify_video(latent.video).to(device=param.device, dtype=param.dtype)
        video = condition_video(own_video, video_positions(frames, rows, cols, latent.fps, device=param.device),
                                stage.conditions, latent.fps, release.keyframe_frames, (frames, rows, cols))
        if video.slots is not None:  # a backstop: the DFR request checks the transformer's file before any work
            require_keyframe_embedding(model.config, f"of stage {stage.name!r}")
    elif any(condition.modality != AUDIO for condition in stage.conditions):
        raise ValueError(f"{stage.name}: a condition of the video stream was given for an audio-only latent (no "
                         "video to hold it in); drop it, or sample a latent with video")
    states = []
    for stream, own in ((video, own_video), (audio, own_audio)):  # the noise in this order: video, then audio
        if stream is None:
            states.append(None)
            continue
        if stream.attention is not None and stream is audio:
            raise ValueError("a condition of the audio stream set attention weights, which the transformer takes "
                             "for the video self-attention only; sample without that condition")
        noise = torch.randn((1, stream.clean.shape[1], 128), generator=generator, device=param.device,
                            dtype=param.dtype)
        state = noised_stream(stream, own, noise, stage.noise_scale, release)
        frozen = stream.frozen and release.frozen_sigma_zero  # its sigma fed as 0
        states.append(state._replace(frozen=True) if frozen else state)
    if stage.ancestral_seed is not None:  # a captured step draws the noise eagerly before each replay
        ancestral = AncestralStep(torch.Generator(param.device).manual_seed(stage.ancestral_seed),
                                  stage.ancestral_eta)
        step = step.around(ancestral) if isinstance(step, CudaGraphStep) else ancestral
    sigmas = stage.sigmas
    if stage.sampler == "res_2s":
        step, sigmas = res2s_step(stage, step, param.device)
    setup = guided_setup(model, positive, negative, None if video is None else video.positions,
                         None if audio is None else audio.positions,
                         stage.video_guidance, stage.audio_guidance, passes_per_forward=passes_per_forward,
                         runner=runner, video_attention=attention_weights(video),
                         video_marked=None if video is None else video.marked,
                         should_stop=None if getattr(step, "captured", False) else should_stop)
    if stage.cache is not None:
        if getattr(step, "captured", False):
            raise ValueError(f"{stage.name}: step caching decides on the host between steps; a captured CUDA graph "
                             "replays the whole step: switch cuda_graphs off or run without the cache")
        grid = None if latent.video is None else tuple(latent.video.shape[2:])
        setup = setup._replace(runner=cached_runner(setup.runner, stage.cache, stage.sigmas, grid))
    observe = observe if video is not None else None  # previews draw the video; audio alone has none
    video_state, audio_state = denoise(setup, *states, sigmas.to(param.device), step=step, progress=progress,
                                       observe=observe, should_stop=should_stop)
    if stage.cache is not None:
        setup.runner.finish(stage.name)
    if audio is None:
        video_tokens = video_state.latent[:, : video.tokens]
        check_finite(stage.name, {"video latents": video_tokens}, SAMPLING_CAUSES, "Nothing was decoded or written.")
        frames, rows, cols = latent.video.shape[2:]
        return AVLatent(unpatchify_video(video_tokens, frames, rows, cols), None, latent.fps,
                        keyframes=generated_keyframes(video_state.latent, video.slots, rows, cols))
    audio_tokens = audio_state.latent[:, : audio.tokens]  # appended guiding tokens are dropped
    if video is None:
        check_finite(stage.name, {"audio latents": audio_tokens}, SAMPLING_CAUSES, "Nothing was decoded or written.")
        return AVLatent(None, unpatchify_audio(audio_tokens, AUDIO_CHANNELS), latent.fps)
    video_tokens = video_state.latent[:, : video.tokens]
    check_finite(stage.name, {"video latents": video_tokens, "audio latents": audio_tokens}, SAMPLING_CAUSES,
                 "Nothing was decoded or written.")
    # a stage that keeps its input's audio (LTX-2.5's two-stage refinement) sampled it for the video's sake only
    sampled_audio = latent.audio if stage.keep_audio else unpatchify_audio(audio_tokens, AUDIO_CHANNELS)
    return AVLatent(unpatchify_video(video_tokens, frames, rows, cols), sampled_audio, latent.fps,
                    kept_sound(latent, stage), generated_keyframes(video_state.latent, video.slots, rows, cols))


def generated_keyframes(tokens: torch.Tensor, slots: tuple[int, int] | None, rows: int, cols: int
                        ) -> torch.Tensor | None:
    """The generated keyframe slots' tokens of a sampled video state (1, T + K, C) as a latent (1, C, slots, rows,
    cols) (the one kind of appended token the sampler returns instead of dropping); None without slots."""
    if slots is None:
        return None
    first, count = slots
    return unpatchify_video(tokens[:, first:first + count * rows * cols], count, rows, cols)


def check_video_only(latent: AVLatent, stage: Stage) -> None:
    """ValueError naming the fix for what a video-only latent cannot take: no video, an audio condition, the step
    cache, a stage that keeps the input's audio."""
    if latent.video is None:
        raise ValueError(f"{stage.name}: a latent without video and without audio has nothing to sample")
    if any(condition.modality == AUDIO for condition in stage.conditions):
        raise ValueError(f"{stage.name}: a condition of the audio stream was given for a video-only latent (no audio "
                         "to hold it in); drop it, or sample a latent with audio")
    if stage.cache is not None:
        raise ValueError(f"{stage.name}: step caching is not available for a video-only latent; run without it")


def res2s_step(stage: Stage, step: Step, device: torch.device) -> tuple[Res2sStep, torch.Tensor]:
    """The res_2s step of a stage and the schedule it runs over (0.0011 inserted before a final 0), its generators
    seeded with the reference's fixed seeds on `device`. Its steps run eagerly: a captured one is refused."""
    if isinstance(step, CudaGraphStep):
        raise ValueError(f"{stage.name}: res_2s steps are not captured as CUDA graphs (two predictions and a final "
                         "one per stage); set cuda_graphs to auto (eager res_2s steps) or off")
    plan = res2s_plan(stage.sigmas).to(device)
    generators = (torch.Generator(device).manual_seed(seed) for seed in (RES2S_STEP_SEED, RES2S_SUBSTEP_SEED))
    return Res2sStep(plan, *generators), plan.sigmas


def noised_stream(stream: ConditionedStream, own: torch.Tensor, noise: torch.Tensor, scale: float,
                  release: Release) -> StreamState:
    """The stream's first state, noised by its release's reference (`Release.noise_from_latent`, `frozen_noised`):
    1.0.0 noises the clean values (held tokens included); 1.2.0 blends from the latent's own tokens `own` (1, T, C)
    and zeros for appended ones, and noises a frozen clip it does not hold clean (as if nothing held it) before
    the mask freezes it."""
    clean = stream.clean.expand_as(noise)
    if not release.noise_from_latent:
        return noised_state(clean, noise, scale, stream.mask)
    if stream.frozen and stream.frozen_noised and release.frozen_noised:
        return noised_from(clean, clean, noise, scale)._replace(mask=stream.mask)
    appended = own.new_zeros(1, clean.shape[1] - own.shape[1], own.shape[2]) if stream.initial is None else \
        stream.initial.to(own)  # generated keyframe slots may start from content (`KeyframeSlots.initial`)
    return noised_from(torch.cat([own, appended], dim=1), clean, noise, scale, stream.mask)


def attention_weights(video: ConditionedStream | None) -> torch.Tensor | None:
    """The video stream's attention weights for the transformer, None where there are none or all are 1 (the
    attention then runs without a mask: the same result, no extra work). One host read at set-up, only when a
    condition weighted its tokens."""
    if video is None or video.attention is None or bool(video.attention.eq(1).all()):
        return None
    return video.attention


def kept_sound(latent: AVLatent, stage: Stage) -> Waveform | None:
    """The sound a sampled latent still holds: the input's, where the stage held the audio exactly."""
    return latent.sound if holds_sound(stage.conditions) else None


def upsample(latent: AVLatent, upsampler: LatentUpsampler, decoders: Decoders) -> AVLatent:
    """The video latent ×2 in height and width (the audio is kept), through the VAE's latent statistics; on the
    upsampler's device, or the one it visits (`ltx2_core.memory.offload`). Generated keyframes (`keyframes`, DFR)
    are upsampled too, as a clip of their own (the reference's separate upsampler call on them)."""
    if upsampler.config.temporal:
        raise ValueError("this is the temporal latent upsampler (it doubles the frames); give the spatial x2 "
                         "upsampler here, and the temporal one to DFR's temporal rounds")
    device = visiting_device(upsampler) or upsampler.initial_conv.weight.device
    statistics = decoders.video.per_channel_statistics
    video = upsample_latent(latent.video.to(device), upsampler, statistics)
    keyframes = None if latent.keyframes is None else upsample_latent(latent.keyframes.to(device), upsampler,
                                                                      statistics)
    return latent._replace(video=video, keyframes=keyframes)


def upsample_time(latent: AVLatent, upsampler: LatentUpsampler, decoders: Decoders) -> AVLatent:
    """The video latent ×2 in time (DFR's temporal round): F' latent frames become 2F' − 1, (N − 1)·2 + 1 pixel
    frames at twice the frame rate, so the clip's duration and its audio are kept; generated keyframes are dropped
    (a round makes its own). Through the VAE's latent statistics, on the upsampler's (visiting) device."""
    if not upsampler.config.temporal:
        raise ValueError("this is a spatial latent upsampler; DFR's temporal rounds need the temporal x2 upsampler "
                         "(--temporal-upsampler)")
    device = visiting_device(upsampler) or upsampler.initial_conv.weight.device
    video = upsample_latent(latent.video.to(device), upsampler, decoders.video.per_channel_statistics)
    return latent._replace(video=video, fps=2 * latent.fps, keyframes=None)


def decode(latent: AVLatent, decoders: Decoders, tiling: TilingConfig | None = TilingConfig(),
           generator: torch.Generator | None = None, video_decode: VideoDecode | None = None) -> Generation | None:
    """Frames and waveform of the first clip of the batch; the video is decoded tile by tile into CPU memory.
    An audio-only latent: only the audio decoder and vocoder run, the frames are None. A latent that holds a
    sound (`AVLatent.sound`) returns that sound as it is, sample for sample, instead of decoding the audio latent
    (the reference writes the input audio, never a re-decoded copy). One NaN/inf check of the decoded media
    (NonFiniteError before anything is returned). `video_decode` replaces `decode_video` (e.g. the tiles spread over
    ranks, `ltx2_core.parallel.tiled_decode`): where it returns None (a rank that does not hold the video) so does
    this, before any audio is decoded."""
    video, decode_frames = None, video_decode or decode_video
    if latent.audio is None:  # video only: frames and an empty waveform
        video_param = next(decoders.video.parameters())
        video = decode_frames(latent.video.to(video_param.device, video_param.dtype), decoders.video, tiling,
                              generator=generator, output_device="cpu")
        if video is None:
            return None
        check_finite("decoding", {"decoded video": video}, DECODING_CAUSES, "Nothing was written.")
        return Generation(video_to_frames(video)[0], torch.zeros(2, 0), 0, latent.fps)
    audio_param = next(decoders.audio.parameters())
    if latent.video is not None:
        video_param = next(decoders.video.parameters())
        video = decode_frames(latent.video.to(video_param.device, video_param.dtype), decoders.video, tiling,
                              generator=generator, output_device="cpu")
        if video is None:
            return None
    if latent.sound is not None and video is not None:
        check_finite("decoding", {"decoded video": video}, DECODING_CAUSES, "Nothing was written.")
        return Generation(video_to_frames(video)[0], latent.sound.samples, latent.sound.rate, latent.fps)
    waveform, rate = decode_audio(latent.audio.to(audio_param.device, audio_param.dtype), decoders.audio,
                                  decoders.vocoder)
    waveform = waveform[0].float().cpu()
    media = {"decoded audio": waveform} if video is None else {"decoded video": video, "decoded audio": waveform}
    check_finite("decoding", media, DECODING_CAUSES, "Nothing was written.")
    frames = None if video is None else video_to_frames(video)[0]
    return Generation(frames, waveform.clamp(-1, 1), rate, latent.fps)
