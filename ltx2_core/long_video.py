"""A long video with its sound: a clip longer than one window sampled as overlapping windows that continue each
other (`ltx2_core.windows` plans them; `docs/video_in/long_video.md` says why so and what was measured).

Each window is an ordinary request of the window's frames (one-stage, two-stage or distilled, `pipeline.
sample_request`) with its own prompt (`Windows.prompts`) and seed (`seed` + window index). Window n > 0 holds, in
every stage, that stage's latent of window n − 1 over the frames they share (`conditioning.Continuation`, denoise mask
0): video latent frames 1..O and the audio latents of the shared time but latent 0. The clip is the windows' latents
joined without the overlaps (each window from its first new frame on) and decoded once, the video by the tiled
decoder over the whole latent and the sound by the audio decoder over the whole, so no decode has a seam.

The loop sits above the samplers: each window's stages run wherever the `sampler` runs them (here, CFG-parallel
ranks through `Distribution.runner`, or persistent workers); every rank of a parallel run plans the same windows
and encodes the same prompts in the same order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import NamedTuple

import torch

from ltx2_core.compile import GraphSetting
from ltx2_core.conditioning import AUDIO, VIDEO, Condition, Continuation
from ltx2_core.model.video_vae.tiling import TilingConfig
from ltx2_core.pipeline import SINGLE_PROCESS, Distribution, StageProgress, generate, sample_request
from ltx2_core.request import Request
from ltx2_core.request_encoding import Prompts, encode_request, generator_on
from ltx2_core.request_models import Models, check_request
from ltx2_core.stage_samplers import LocalSampler, StageSampler
from ltx2_core.stages import AVLatent, Generation, decode
from ltx2_core.windows import Window


def plan_windows(request: Request) -> tuple[Window, ...]:
    """The request's windows (one of `request.frames` without `request.windows`)."""
    if request.windows is None:
        return (Window(0, request.frames, 0, 0, 0, 0, 0, request.prompt),)
    return request.windows.plan(request.frames, request.fps, request.prompt)


def window_request(request: Request, window: Window) -> Request:
    """The one-window request of `window`: its frames, prompt and seed (`seed` + index); the images in the first."""
    return replace(request, frames=window.frames, prompt=window.prompt, seed=request.seed + window.index,
                   windows=None, images=request.images if window.index == 0 else ())


def continuation(window: Window, previous: Window, latents: Sequence[AVLatent]) -> tuple[tuple[Condition, ...], ...]:
    """Per stage, what `window` holds of `previous`'s latents of that stage (`latents`, one per stage): the video
    latent frames it shares (at its latent frames 1..held) and the audio latents it shares but its latent 0."""
    video_from = window.latent_start + 1 - previous.latent_start
    audio_from = window.audio_start + 1 - previous.audio_start
    return tuple((Continuation(VIDEO, latent.video[:, :, video_from:video_from + window.held], 1),
                  Continuation(AUDIO, latent.audio[:, :, audio_from:audio_from + window.audio_shared - 1], 1))
                 for latent in latents)


class Sampled(NamedTuple):
    """A sampled window: its plan and each stage's latent (the last is the window's final latent)."""

    window: Window
    stages: tuple[AVLatent, ...]

    @property
    def latent(self) -> AVLatent:
        return self.stages[-1]


def join(pieces: Sequence[Sampled]) -> AVLatent:
    """The clip's latent: each window's final latent from its first new video frame and audio latent on, in order
    (on the CPU)."""
    video = torch.cat([p.latent.video[:, :, p.window.video_kept:].cpu() for p in pieces], dim=2)
    audio = torch.cat([p.latent.audio[:, :, p.window.audio_kept:].cpu() for p in pieces], dim=2)
    return AVLatent(video, audio, pieces[0].latent.fps)


@torch.no_grad()
def sample_windows(request: Request, models: Models, progress: StageProgress | None = None, *,
                   sampler: StageSampler | None = None,
                   prompts: Callable[[Request], Prompts] | None = None,
                   pieces: list[Sampled] | None = None) -> tuple[AVLatent, torch.Generator]:
    """Every window of `request` sampled in order (`sampler`, default `models.transformer` here), each holding the
    one before: the joined latent and the last window's generator. `prompts` encodes a window's request (default:
    here; a parallel run encodes on one rank); each distinct prompt is encoded once. `pieces`: when given, each
    sampled window is appended to it (what the seam tests measure)."""
    sampler = sampler or LocalSampler(models.transformer)
    encode = prompts or (lambda one: encode_request(one, models.prompt_encoder, sampler.config))
    windows = plan_windows(request)
    encoded: dict[str, Prompts] = {}
    pieces = [] if pieces is None else pieces
    previous: Sampled | None = None
    generator = None
    for window in windows:
        one = window_request(request, window)
        if one.prompt not in encoded:
            encoded[one.prompt] = encode(one)
        held = continuation(window, previous.window, previous.stages) if previous is not None else ()
        stages: list[AVLatent] = []
        named = None if progress is None else (
            lambda name, done, total, i=window.index: progress(f"window {i + 1}/{len(windows)} {name}", done, total))
        _, generator = sample_request(one, models, *encoded[one.prompt], named, sampler=sampler, held=held,
                                      stage_latents=stages)
        previous = Sampled(window, tuple(stages))
        pieces.append(previous)
    return join(pieces), generator


@torch.no_grad()
def generate_long(request: Request, models: Models, progress: StageProgress | None = None, *,
                  cuda_graphs: GraphSetting = "auto", passes_per_forward: int | None = None,
                  distribution: Distribution = SINGLE_PROCESS, sampler: StageSampler | None = None,
                  tiling: TilingConfig = TilingConfig()) -> Generation | None:
    """A clip of `request.frames` as `request.windows` cut it, end to end (the options as `pipeline.generate`'s):
    the decoded frames and waveform of the whole, or None where this process does not decode. A request that fits
    one window (or has no `windows`) is one `generate` with the first window's prompt. Every check runs before any
    model work."""
    if request.windows is not None:
        request.check()  # the windows' own faults before they are planned
    windows = plan_windows(request)
    if len(windows) == 1:
        return generate(replace(request, prompt=windows[0].prompt, windows=None), models, progress,
                        cuda_graphs=cuda_graphs, passes_per_forward=passes_per_forward, distribution=distribution,
                        sampler=sampler, tiling=tiling)
    sampler = sampler or LocalSampler(models.transformer, cuda_graphs=cuda_graphs,
                                      passes_per_forward=passes_per_forward, runner=distribution.runner,
                                      one_gpu=distribution == SINGLE_PROCESS)
    check_request(request, models, sampler.config)
    encoder = models.prompt_encoder
    latent, generator = sample_windows(
        request, models, progress, sampler=sampler,
        prompts=lambda one: distribution.prompts(lambda: encode_request(one, encoder, sampler.config)))
    if not distribution.decodes and distribution.video_decode is None:
        return None
    return decode(latent, models.decoders, tiling, generator=generator_on(generator, request.seed, models.decoders),
                  video_decode=distribution.video_decode)
