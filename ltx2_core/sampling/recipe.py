"""A sampling stage built from its parts, by the release's rules, in one place: the pipelines (and so the command
line), the sampler nodes and the long video all build their stages here, so a rule of a release is written once.

What a caller knows (`StageParts`): the schedule (the LTX2 schedule of `steps`, the distilled table, the stage-2
refinement table, or explicit sigmas), the guidance it was given, the conditions it encoded, its LoRAs, the seed, and
whether the latent it refines came from a guided stage. What the rules add (`build_stage`):

* the sigmas and the noise scale: 1 from noise; the table's first sigma when refining (explicit sigmas: the first);
* a sound the video is generated to (audio to video) held exactly is not sampled: no audio guidance, as the
  reference's audio-to-video pipeline gives its audio guider no scales; and while the audio takes no CFG, the
  unconditional pass keeps the positive prompt on the audio stream (that guider has no negative context, and those
  audio tokens still reach the video through the audio->video cross-attention);
* ancestral steps (fresh noise from seed + 10000) for a distilled-table stage where the release's distilled
  pipeline takes them (`Release.ancestral_distilled`: LTX-2.5), unless the stage samples with res_2s, and except where the conditions belong to a pipeline
  whose reference takes plain Euler steps: an IC-LoRA control (`ICLoraPipeline`), a held video (`RetakePipeline`:
  sound for a video, a retake);
* which audio a refinement returns: that of the guided stage it refines, where the release's two-stage pipeline
  keeps stage 1's sound (`Release.two_stage_keeps_stage1_audio`: LTX-2.5); the refinement still samples the audio,
  which the video attends to; a stage holding keyframes (`EncodedKeyframe`) returns its own audio, as the reference's
  `KeyframeInterpolationPipeline` (both releases).

The other release rules act where the stage is sampled (`stages.sample`): how the streams are noised
(`Release.noise_from_latent`, `frozen_noised`), a frozen stream's sigma (`frozen_sigma_zero`) and a keyframe's time
span (`keyframe_frames`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ltx2_core.conditioning.audio import held_sound
from ltx2_core.conditioning.control import EncodedControl
from ltx2_core.conditioning.keyframes import EncodedKeyframe
from ltx2_core.conditioning.stream import Condition
from ltx2_core.conditioning.video import EncodedVideo
from ltx2_core.releases import RELEASES, ModelVersion
from ltx2_core.sampling.cache import CacheSettings
from ltx2_core.sampling.guidance import GuidanceParams, active_passes, default_steps
from ltx2_core.sampling.schedules import DISTILLED_SIGMAS, STAGE2_SIGMAS, ltx2_sigmas, sigma_table
from ltx2_core.sampling.stage import Stage
from ltx2_core.types import TextEmbeddings

SCHEDULES = ("ltx2", "distilled", "stage-2 refine")
# ltx_pipelines/distilled.py: the ancestral loop's generator is seeded apart from the initial noise's
ANCESTRAL_SEED_OFFSET = 10000


# conditions whose reference pipelines step with plain Euler also in a distilled stage
EULER_ONLY = (EncodedControl, EncodedVideo)


class StageParts(NamedTuple):
    """What a caller knows of a stage.

    schedule:       "ltx2" (from noise, `steps` steps), "distilled" (the 8-step table) or "stage-2 refine" (re-noise to
                    0.909375, 3 steps)
    steps:          the LTX2 schedule's steps; None: the release's
    sigmas:         explicit sigmas overriding the schedule (falling to 0); the latent is noised to the first
    video_guidance: the video's guidance; None: plain conditional prediction
    audio_guidance: the audio's, the same way
    conditions:     what the stage holds (`ltx2_core.conditioning`), in order
    loras:          (LoRA, strength) fused for the stage only
    seed:           the run's seed (ancestral steps draw from seed + 10000)
    after_guided:   the latent being refined was sampled by a guided stage (the two-stage recipe's stage 1)
    name:           what errors and progress call the stage
    ancestral_seed: the caller's own choice of ancestral steps and their seed (ComfyUI's KSamplerSelect
                    euler_ancestral in LTX-2 SamplerCustomAdvanced); None: the release's rule
    cache:          step caching settings (`ltx2_core.sampling.cache`); None: every step runs
    sampler:        "euler" or "res_2s" (`Stage.sampler`); res_2s takes no ancestral steps
    tokens:         the LTX2 schedule's token count (its shift); None: 4096, as every pipeline but HQ, whose stage 1
                    shifts by its latent's F'·H'·W' (`TI2VidTwoStagesHQPipeline`)
    """

    schedule: str = "ltx2"
    steps: int | None = None
    sigmas: tuple[float, ...] | None = None
    video_guidance: GuidanceParams | None = None
    audio_guidance: GuidanceParams | None = None
    conditions: Sequence[Condition] = ()
    loras: Sequence = ()
    seed: int = 0
    after_guided: bool = False
    name: str = "denoise"
    ancestral_seed: int | None = None
    cache: CacheSettings | None = None
    sampler: str = "euler"
    tokens: int | None = None


class BuiltStage(NamedTuple):
    """A stage ready to sample, and the text contexts of its unconditional pass (None: no negative prompt)."""

    stage: Stage
    negative: TextEmbeddings | None


def build_stage(version: ModelVersion | str, parts: StageParts, positive: TextEmbeddings,
                negative: TextEmbeddings | None) -> BuiltStage:
    """`parts` made a `Stage` by the rules of release `version` (module docstring); ValueError for an unknown
    schedule."""
    release = RELEASES[ModelVersion(version)]
    sigmas, noise_scale = schedule_sigmas(version, parts)
    sound = held_sound(parts.conditions)
    audio_guidance = parts.audio_guidance
    if sound is not None and sound.span is None:
        audio_guidance = held_audio_guidance(sound.strength, audio_guidance)
    ancestral = (parts.schedule == "distilled" and parts.sigmas is None and release.ancestral_distilled
                 and parts.sampler == "euler" and not any(isinstance(c, EULER_ONLY) for c in parts.conditions))
    seed = parts.seed + ANCESTRAL_SEED_OFFSET if ancestral else parts.ancestral_seed
    stage = Stage(sigmas, parts.name, noise_scale=noise_scale, video_guidance=parts.video_guidance,
                  audio_guidance=audio_guidance, loras=parts.loras, conditions=parts.conditions, ancestral_seed=seed,
                  keep_audio=noise_scale < 1 and parts.after_guided and release.two_stage_keeps_stage1_audio
                  and not any(isinstance(c, EncodedKeyframe) for c in parts.conditions),
                  cache=parts.cache, sampler=parts.sampler)
    return BuiltStage(stage, uncond_contexts(positive, negative, audio_guidance, held=sound is not None))


def schedule_sigmas(version: ModelVersion | str, parts: StageParts):
    """(sigmas (steps + 1,) fp32 on the CPU, the noise scale the latent is brought to first)."""
    if parts.sigmas is not None:
        return sigma_table(tuple(parts.sigmas)), float(parts.sigmas[0])
    if parts.schedule == "distilled":
        return sigma_table(DISTILLED_SIGMAS), 1.0
    if parts.schedule == "stage-2 refine":
        return sigma_table(STAGE2_SIGMAS), STAGE2_SIGMAS[0]
    if parts.schedule == "ltx2":
        return ltx2_sigmas(parts.steps or default_steps(version), parts.tokens), 1.0
    raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {parts.schedule!r}")


def held_audio_guidance(strength: float, guidance: GuidanceParams | None) -> GuidanceParams | None:
    """The audio guidance given a sound the video is generated to, held with `strength`: none at strength 1 (the
    sound is not sampled, and the reference's audio-to-video pipeline gives its audio guider no scales)."""
    return GuidanceParams() if strength == 1 else guidance


def guided(stage: Stage) -> bool:
    """Whether the stage guides its prediction (any pass beyond the conditional one)."""
    return active_passes(stage.video_guidance or GuidanceParams(), stage.audio_guidance or GuidanceParams()) != \
        ("cond",)


def uncond_contexts(positive: TextEmbeddings, negative: TextEmbeddings | None, audio_guidance: GuidanceParams | None,
                    held: bool) -> TextEmbeddings | None:
    """The text contexts of the unconditional (CFG) pass. With a held sound and no audio CFG, its audio stream
    keeps the positive prompt: the reference's audio-to-video pipeline gives its audio guider no negative context,
    and the audio tokens of that pass still reach the video through the audio->video cross-attention."""
    if negative is None or not held or (audio_guidance or GuidanceParams()).cfg != 1:
        return negative
    return TextEmbeddings(negative.video, positive.audio)


__all__ = ["ANCESTRAL_SEED_OFFSET", "SCHEDULES", "BuiltStage", "StageParts", "build_stage", "guided",
           "held_audio_guidance", "schedule_sigmas", "uncond_contexts"]
