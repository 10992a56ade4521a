"""The sync-free denoising loop: guided Euler steps over a sigma schedule, every guidance pass in one forward.

Set-up (`guided_setup`) decides on the host which passes run, builds the per-pass text contexts, RoPE tables and
perturbation masks once, and moves the guidance scales to the device. A step (`guided_step`) then only runs device
work of fixed shapes: no tensor is read on the host, no Python branch depends on a tensor, no host data is copied
in. So a step can be compiled once (scales are tensor inputs, so changing them never recompiles) or captured as a
CUDA graph (`ltx2_core.compile`).

Passes are produced by a `PassRunner`: `BatchedPasses` runs them as ONE transformer forward with batch = number of
passes; a CFG-parallel runner gives each GPU some of the passes and gathers their predictions in the same layout.

Audio only (text to audio): the video state is None from the set-up (no video positions) to the last step; every
function here then passes None through for the video (a run's streams are fixed, so this is no per-step branch on
a value), and the transformer runs the audio stream alone. Video only (the HDR IC-LoRA): the audio state is None
in the same way, and the transformer runs the video stream alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple, Protocol

import torch

from ltx2_core.errors import Interrupted
from ltx2_core.model.transformer import LTX2Transformer, to_x0
from ltx2_core.model.transformer.perturbations import BatchPerturbations
from ltx2_core.sampling.guidance import GuidanceParams, GuidanceWeights, active_passes, guidance_weights, guide
from ltx2_core.sampling.steps import (
    StreamState,
    euler_ancestral_step,
    euler_step,
    keep_clean,
    stream_sigmas,
    timesteps,
)
from ltx2_core.types import PassPerturbation, RunConstants, StreamInput, TextEmbeddings

Progress = Callable[[int, int], None]  # (steps done, total steps), called on the host after each step is queued
Observer = Callable[[torch.Tensor, torch.Tensor], None]  # a step's (video, audio) latent tokens, still on the device


class PassRunner(Protocol):
    """Denoised predictions of every guidance pass for one state: (passes, tokens, channels) per modality; `video`
    None (audio only): the video's is None."""

    passes: tuple[str, ...]

    def __call__(self, video: StreamInput | None, audio: StreamInput
                 ) -> tuple[torch.Tensor | None, torch.Tensor]: ...


class BatchedPasses:
    """All passes of a step as one transformer forward: sample p of the batch is pass `passes[p]`."""

    def __init__(self, model: LTX2Transformer, run: RunConstants, passes: tuple[str, ...],
                 perturbations: BatchPerturbations | None) -> None:
        self.model, self.run, self.passes, self.perturbations = model, run, passes, perturbations

    forwards = 1

    def __call__(self, video: StreamInput | None, audio: StreamInput | None
                 ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        velocity_video, velocity_audio = self.velocities(video, audio)
        audio_x0 = None if audio is None else to_x0(audio.latent, velocity_audio, audio.timesteps)
        return None if video is None else to_x0(video.latent, velocity_video, video.timesteps), audio_x0

    def velocities(self, video: StreamInput | None, audio: StreamInput) -> tuple[torch.Tensor | None, torch.Tensor]:
        """The transformer's velocities of every pass (what a step cache keeps)."""
        return self.model(video, audio, self.run, self.perturbations)


class ChunkedPasses:
    """The passes in groups, one forward per group, in order: less activation memory for the same predictions."""

    def __init__(self, groups: list[BatchedPasses]) -> None:
        self.groups = groups
        self.passes = tuple(name for group in groups for name in group.passes)
        self.forwards = len(groups)

    def __call__(self, video: StreamInput | None, audio: StreamInput) -> tuple[torch.Tensor | None, torch.Tensor]:
        return self._each(video, audio, lambda group, v, a: group(v, a))

    def velocities(self, video: StreamInput | None, audio: StreamInput) -> tuple[torch.Tensor | None, torch.Tensor]:
        """The transformer's velocities of every pass, group by group."""
        return self._each(video, audio, lambda group, v, a: group.velocities(v, a))

    def _each(self, video: StreamInput | None, audio: StreamInput, run) -> tuple[torch.Tensor | None, torch.Tensor]:
        outputs, start = [], 0
        for group in self.groups:
            part = slice(start, start + len(group.passes))
            outputs.append(run(group, _passes(video, part), _passes(audio, part)))
            start = part.stop
        video_out = None if video is None else torch.cat([v for v, _ in outputs])
        return video_out, None if audio is None else torch.cat([a for _, a in outputs])


def _passes(stream: StreamInput | None, part: slice) -> StreamInput | None:
    return None if stream is None else StreamInput(*(t[part] for t in stream))


class RunnerFactory(Protocol):
    """Builds a step's PassRunner from the run's constants (prepared for every pass, in pass order) and the passes'
    perturbations: `LocalPasses` on one device; CFG-parallel runners (in `ltx2_core.parallel`) split the passes."""

    def __call__(self, model: LTX2Transformer, run: RunConstants, passes: tuple[str, ...],
                 perturbations: list[PassPerturbation]) -> PassRunner: ...


def batched_passes(model: LTX2Transformer, run: RunConstants, passes: tuple[str, ...],
                   perturbations: list[PassPerturbation], part: slice) -> BatchedPasses:
    """The passes `part` as one forward: their slice of the text contexts and their perturbations."""
    return BatchedPasses(model, run.batch(part), passes[part], _batch_perturbations(model, perturbations[part]))


class LocalPasses:
    """Every pass on this device: one forward, or groups of `passes_per_forward` that share the run's RoPE."""

    def __init__(self, passes_per_forward: int | None = None) -> None:
        size = passes_per_forward
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ValueError(f"passes_per_forward must be an integer ≥ 1, got {passes_per_forward!r}")
        self.size = size

    def __call__(self, model: LTX2Transformer, run: RunConstants, passes: tuple[str, ...],
                 perturbations: list[PassPerturbation]) -> PassRunner:
        size = self.size or len(passes)
        groups = [batched_passes(model, run, passes, perturbations, slice(start, start + size))
                  for start in range(0, len(passes), size)]
        return groups[0] if len(groups) == 1 else ChunkedPasses(groups)


class StepSetup(NamedTuple):
    """What a step needs besides the state: the pass runner and each modality's device-side guidance scales
    (None: no guidance, the single conditional pass is the prediction)."""

    runner: PassRunner
    video_weights: GuidanceWeights | None
    audio_weights: GuidanceWeights | None


def pass_perturbations(passes: tuple[str, ...], video: GuidanceParams, audio: GuidanceParams
                       ) -> list[PassPerturbation]:
    """One perturbation per pass: STG skips self-attention in each modality's blocks (where its stg ≠ 0),
    isolation removes every audio<->video cross-attention; cond and uncond are unperturbed."""
    stg = PassPerturbation.stg(video.stg_blocks if video.stg else (), audio.stg_blocks if audio.stg else ())
    table = {"cond": PassPerturbation(), "uncond": PassPerturbation(), "perturbed": stg,
             "isolated": PassPerturbation.isolated()}
    return [table[name] for name in passes]


def guided_setup(
    model: LTX2Transformer,
    positive: TextEmbeddings,
    negative: TextEmbeddings | None,
    video_positions: torch.Tensor | None,
    audio_positions: torch.Tensor,
    video_guidance: GuidanceParams | None = None,
    audio_guidance: GuidanceParams | None = None,
    *,
    passes_per_forward: int | None = None,
    runner: RunnerFactory | None = None,
    video_attention: torch.Tensor | None = None,
    should_stop: Callable[[], bool] | None = None,
    video_marked: torch.Tensor | None = None,
) -> StepSetup:
    """Set-up of a run: which passes (decided here, on the host), their contexts, RoPE and perturbations, and the
    scales on the device. No guidance for either modality (None or neutral) means one conditional pass.
    `passes_per_forward` caps the batch of one forward (None: all passes in one); RoPE is shared by all groups.
    `runner` builds the pass runner instead (e.g. CFG-parallel); by default `LocalPasses(passes_per_forward)`.
    `video_positions` None: an audio-only run (text to audio). The video guidance is then unused, and the audio's
    modality scale is taken as 1: without a video there is no audio<->video cross-attention, so the isolated pass
    equals the conditional one and its term is exactly 0 (the reference's T2A sets 1.0 for that reason).
    `video_attention`: (1, video tokens, video tokens) attention weights of the video stream
    (`ConditionedStream.attention`), made the video self-attention's log bias once here and shared by every pass;
    None: the attention runs without a mask. `video_marked`: (1, video tokens, 1) tokens the keyframe embedding marks
    besides the first latent frame (`ConditionedStream.marked`), shared by every pass. `should_stop` is read before every transformer block of every
    forward (`RunConstants.should_stop`); None for a step that is replayed as a captured CUDA graph."""
    video_guidance, audio_guidance = video_guidance or GuidanceParams(), audio_guidance or GuidanceParams()
    if video_positions is None:
        video_guidance, audio_guidance = GuidanceParams(), dataclasses.replace(audio_guidance, modality=1.0)
    if audio_positions is None:  # video only: the mirror image (no audio, no isolated-pass term)
        video_guidance, audio_guidance = dataclasses.replace(video_guidance, modality=1.0), GuidanceParams()
    passes = active_passes(video_guidance, audio_guidance)
    if "uncond" in passes and negative is None:
        raise ValueError("cfg ≠ 1 needs a negative prompt (its text contexts); pass one or set cfg to 1")
    runner = runner or LocalPasses(passes_per_forward)
    if (arrange := getattr(runner, "arrange", None)) is not None:  # a layout per stage (`parallel.stage_regroup`)
        arrange(model, passes)
    device = next(model.parameters()).device
    contexts = [negative if name == "uncond" else positive for name in passes]
    audio_only, video_only = video_positions is None, audio_positions is None
    run = model.prepare_run(None if audio_only else video_positions.to(device),
                            None if video_only else audio_positions.to(device),
                            None if audio_only else torch.cat([c.video for c in contexts]).to(device),
                            None if video_only else torch.cat([c.audio for c in contexts]).to(device),
                            video_attention=None if audio_only or video_attention is None else
                            video_attention.to(device),
                            video_marked=None if audio_only or video_marked is None else
                            video_marked.to(device))._replace(should_stop=should_stop)
    pass_runner = runner(model, run, passes, pass_perturbations(passes, video_guidance, audio_guidance))
    if passes == ("cond",):
        return StepSetup(pass_runner, None, None)
    return StepSetup(pass_runner, None if audio_only else guidance_weights(video_guidance, passes, device),
                     None if video_only else guidance_weights(audio_guidance, passes, device))


def _batch_perturbations(model: LTX2Transformer, perturbations: list[PassPerturbation]) -> BatchPerturbations | None:
    if all(p == PassPerturbation() for p in perturbations):
        return None
    param = model.scale_shift_table  # never quantised: the compute device and dtype
    return BatchPerturbations(perturbations, model.config.num_layers, param.device, param.dtype)


def guided_prediction(setup: StepSetup, video: StreamState | None, audio: StreamState, sigma: torch.Tensor
                      ) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Every pass at σ (a 0-d device tensor) in the runner's forwards, combined by the guidance -> the video and
    audio x0 (1, tokens, C), fp32, with the conditioned tokens kept at their clean values (video None: None)."""
    count = len(setup.runner.passes)
    sigmas = sigma.reshape(1).expand(count)
    if audio is None:  # video only
        video_in = StreamInput(video.latent.expand(count, -1, -1), stream_sigmas(video, sigmas),
                               timesteps(video, sigma, count))
        return keep_clean(_combine(setup.runner(video_in, None)[0], setup.video_weights), video), None
    audio_in = StreamInput(audio.latent.expand(count, -1, -1), stream_sigmas(audio, sigmas),
                           timesteps(audio, sigma, count))
    if video is None:
        return None, keep_clean(_combine(setup.runner(None, audio_in)[1], setup.audio_weights), audio)
    video_in = StreamInput(video.latent.expand(count, -1, -1), stream_sigmas(video, sigmas),
                           timesteps(video, sigma, count))
    video_x0, audio_x0 = setup.runner(video_in, audio_in)
    return (keep_clean(_combine(video_x0, setup.video_weights), video),
            keep_clean(_combine(audio_x0, setup.audio_weights), audio))


def guided_step(setup: StepSetup, video: StreamState | None, audio: StreamState, sigma: torch.Tensor,
                sigma_next: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
    """One Euler step from σ to σ' (0-d device tensors) -> the next video and audio latents (1, tokens, C)
    (video None: None)."""
    video_x0, audio_x0 = guided_prediction(setup, video, audio, sigma)
    audio_next = None if audio is None else euler_step(audio.latent, audio_x0, sigma, sigma_next)
    return None if video is None else euler_step(video.latent, video_x0, sigma, sigma_next), audio_next


class AncestralStep:
    """A `Step` that moves each stream with `euler_ancestral_step`, drawing its noise on the device from
    `generator`: per step the video's (1, tokens, C), then the audio's, in the latent dtype, as the reference's
    ancestral loop draws them (no video: the audio's only). Drawing is device work from a device generator, so the
    loop still never waits; a noise draw on the last step (σ' = 0) is multiplied by 0, and nothing is drawn after
    it. A step is `draw` then `advance` (device work only, no draw): a captured step (`compile.CudaGraphStep`)
    draws eagerly before each replay and captures `advance`. The generator is the step's own, so drawing before
    the prediction gives the reference's values."""

    def __init__(self, generator: torch.Generator, eta: float = 1.0) -> None:
        self.generator, self.eta = generator, eta

    def __call__(self, setup: StepSetup, video: StreamState | None, audio: StreamState, sigma: torch.Tensor,
                 sigma_next: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        return self.advance(setup, video, audio, sigma, sigma_next, *self.draw(video, audio))

    def draw(self, video: StreamState | None, audio: StreamState) -> tuple[torch.Tensor | None, torch.Tensor]:
        """One step's fresh noise: the video's, then the audio's (video None: None)."""
        return (None if video is None else self._noise(video.latent),
                None if audio is None else self._noise(audio.latent))

    def advance(self, setup: StepSetup, video: StreamState | None, audio: StreamState, sigma: torch.Tensor,
                sigma_next: torch.Tensor, video_noise: torch.Tensor | None, audio_noise: torch.Tensor
                ) -> tuple[torch.Tensor | None, torch.Tensor]:
        """The step with its noise given (`draw`)."""
        video_x0, audio_x0 = guided_prediction(setup, video, audio, sigma)
        return tuple(None if state is None else
                     euler_ancestral_step(state, x0, sigma, sigma_next, noise, self.eta)
                     for state, x0, noise in ((video, video_x0, video_noise), (audio, audio_x0, audio_noise)))

    def _noise(self, latent: torch.Tensor) -> torch.Tensor:
        return torch.randn(latent.shape, generator=self.generator, device=latent.device, dtype=latent.dtype)


def _combine(x0: torch.Tensor, weights: GuidanceWeights | None) -> torch.Tensor:
    """(passes, tokens, C) -> (1, tokens, C): the guided prediction, or the single pass without guidance."""
    if weights is None:
        return x0
    return guide(x0.unsqueeze(1), weights)


# a step may carry `captured = True` (`compile.CudaGraphStep`): it replays a graph, which runs no Python between
# blocks, so a run reads its `should_stop` between steps only
Step = Callable[[StepSetup, StreamState | None, StreamState, torch.Tensor, torch.Tensor],
               tuple[torch.Tensor | None, torch.Tensor]]


def denoise(
    setup: StepSetup,
    video: StreamState | None,
    audio: StreamState,
    sigmas: torch.Tensor,
    *,
    step: Step = guided_step,
    progress: Progress | None = None,
    observe: Observer | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> tuple[StreamState, StreamState]:
    """Runs len(sigmas) − 1 steps. `sigmas` is the (steps + 1,) fp32 schedule already on the device; indexing it
    is a view, so the loop never waits for the device. `step` may be a compiled or graph-captured guided_step.
    `observe` gets each step's (video, audio) latent tokens, on the device, before `progress` is called. `video`
    None (audio only, set up without video positions): it stays None; so does `audio` None (video only).
    `should_stop` (a host flag, never a tensor) is read before each step: True raises `Interrupted` (a step run
    eagerly also reads it between its blocks: `guided_setup`)."""
    total = sigmas.shape[0] - 1
    for index in range(total):
        if should_stop is not None and should_stop():
            raise Interrupted(f"stopped on request before step {index + 1} of {total}")
        video_latent, audio_latent = step(setup, video, audio, sigmas[index], sigmas[index + 1])
        video = None if video is None else video._replace(latent=video_latent)
        audio = None if audio is None else audio._replace(latent=audio_latent)
        if observe is not None:
            observe(video_latent, audio_latent)
        if progress is not None:
            progress(index + 1, total)
    return video, audio
