"""One sampling stage as a value: everything a sampler needs besides the latent, the prompts, the generator and the
progress callback (the schedule, how far the latent is noised, the guidance, the LoRAs and the conditions).

The pipelines build one `Stage` per stage (`ltx2_core.pipeline.sample_request`), the ComfyUI sampler node one per
run, and every sampler takes it whole: `stages.sample` here, `LocalSampler` (which fuses its LoRAs) and the
workers' `WorkerSampler`, which sends it in a `StageJob`. A new per-stage input is one field here, not one argument
in each of them.
"""

from __future__ import annotations

import dataclasses
from typing import Generic, TypeVar

import torch

from ltx2_core.conditioning.stream import Condition
from ltx2_core.sampling.cache import CacheSettings
from ltx2_core.sampling.guidance import GuidanceParams

L = TypeVar("L")  # a LoRA: a loaded `ltx2_core.loader.lora.Lora` in this process, its file's path in a StageJob
T = TypeVar("T")


SAMPLERS = ("euler", "res_2s")


def check_sampler(sampler: str, *, ancestral: bool = False, cache: bool = False, name: str = "denoise") -> None:
    """ValueError naming the fix for an unknown sampler, or res_2s with ancestral steps or a step cache."""
    if sampler not in SAMPLERS:
        raise ValueError(f"{name}: sampler must be one of {', '.join(SAMPLERS)}, got {sampler!r}")
    if sampler == "res_2s" and ancestral:
        raise ValueError(f"{name}: res_2s draws its own SDE noise; ancestral Euler steps are another sampler: pick "
                         "euler_ancestral or res_2s, not both")
    if sampler == "res_2s" and cache:
        raise ValueError(f"{name}: step caching skips whole steps of one prediction; res_2s predicts twice per step: "
                         "run it without the cache (or use the euler sampler with the cache)")


@dataclasses.dataclass(frozen=True, eq=False)  # identity equality: comparing tensors has no single truth value
class Stage(Generic[L]):
    """One sampling stage.

    sigmas:         (steps + 1,) fp32, the noise levels from the first to the last (0)
    name:           what errors and progress call it ("denoise", "stage 1", "stage 2")
    noise_scale:    how far the latent is noised first: 1 pure noise, the first sigma when refining
    video_guidance: the video's guidance scales; None: plain conditional prediction
    audio_guidance: the audio's, the same way
    loras:          (LoRA, strength) fused for this stage only; `L` is a `Lora` here and its file's path in a
                    `StageJob` (workers read and shard LoRAs from their files, see `ltx2_core.runtime.protocol`)
    conditions:     what is held during sampling (`ltx2_core.conditioning`: encoded images at frames, ...), applied
                    in order; their tensors may live on any device
    ancestral_seed: None: deterministic Euler steps; a seed: ancestral Euler steps whose fresh noise comes
                    from a device generator seeded with it (LTX-2.5's distilled stage 1: the run's seed + 10000)
    ancestral_eta:  the ancestral steps' η: 1 fully ancestral (the distilled stage 1), 0.5 for DFR's temporal
                    rounds (1.2.0's `_TEMPORAL_ANCESTRAL_ETA`), 0 the plain Euler step; unused without a seed
    keep_audio:     the sampled latent keeps the input latent's audio: the stage samples the audio too (the video
                    attends to it) but returns the one it was given (LTX-2.5's two-stage refinement, which returns
                    stage 1's sound, `Release.two_stage_keeps_stage1_audio`)
    cache:          step caching (`ltx2_core.sampling.cache`: ComfyUI's EasyCache decisions); None: every step runs
    sampler:        "euler" (first order; ancestral with an `ancestral_seed`) or "res_2s" (the HQ pipeline's second
                    order SDE sampler, `ltx2_core.sampling.res2s`: two predictions per step, its own fixed noise)
    """

    sigmas: torch.Tensor
    name: str = "denoise"
    noise_scale: float = 1.0
    video_guidance: GuidanceParams | None = None
    audio_guidance: GuidanceParams | None = None
    loras: tuple[tuple[L, float], ...] = ()
    conditions: tuple[Condition, ...] = ()
    ancestral_seed: int | None = None
    ancestral_eta: float = 1.0
    keep_audio: bool = False
    cache: CacheSettings | None = None
    sampler: str = "euler"

    def __post_init__(self) -> None:
        # callers pass lists (the handle's LoRAs, encode_conditions' result); the record holds tuples
        object.__setattr__(self, "loras", tuple(self.loras))
        object.__setattr__(self, "conditions", tuple(self.conditions))
        if not 0.0 <= self.ancestral_eta <= 1.0:
            raise ValueError(f"{self.name}: ancestral_eta must lie in [0, 1] (got {self.ancestral_eta})")
        check_sampler(self.sampler, ancestral=self.ancestral_seed is not None, cache=self.cache is not None,
                      name=self.name)

    @property
    def loop_steps(self) -> int:
        """Steps the denoising loop reports: one per interval, and for res_2s a final prediction where the schedule
        falls to 0 (`ltx2_core.sampling.res2s`). A host read of the (CPU) sigmas."""
        final = self.sampler == "res_2s" and float(self.sigmas[-1]) == 0
        return self.sigmas.shape[0] - 1 + int(final)

    def cpu(self) -> Stage[L]:
        """This stage with its sigmas and every tensor its conditions hold on the CPU (to send it elsewhere)."""
        return dataclasses.replace(self, sigmas=self.sigmas.cpu(), conditions=on_cpu(self.conditions))


def on_cpu(value: T) -> T:
    """`value` with the tensors it holds on the CPU: a tensor, or tensors in (nested) tuples, NamedTuples and
    dataclasses; anything else as it is. Conditions are such values, so a new kind travels without code here."""
    if isinstance(value, torch.Tensor):
        return value.cpu()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{field.name: on_cpu(getattr(value, field.name))
                                             for field in dataclasses.fields(value) if field.init})
    if isinstance(value, tuple):
        items = [on_cpu(item) for item in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return value
