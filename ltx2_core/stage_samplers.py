"""What runs a generation's stages: the `StageSampler` protocol (one `Stage` sampled with its LoRAs fused for the
stage only) and `LocalSampler`, which runs them on a transformer in this process (CUDA graphs where the step is
capturable, the passes per forward from the device's measured policy); `ltx2_core.runtime.WorkerSampler` runs them
on persistent workers."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

import torch

from ltx2_core.compile import CudaGraphStep, GraphSetting, graph_setting, use_graphs
from ltx2_core.loader.lora import Lora, fused_loras
from ltx2_core.memory.pass_policy import device_capability, policy_cap
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.request import ONE_GPU
from ltx2_core.sampling import guided_step
from ltx2_core.sampling.denoise import Observer, RunnerFactory
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import AVLatent, sample
from ltx2_core.types import TextEmbeddings


class StageSampler(Protocol):
    """Samples one `Stage` as `stages.sample` does, with the stage's LoRAs fused for the stage only: here
    (`LocalSampler`) or on persistent workers (`ltx2_core.runtime.WorkerSampler`). `device`: where the generator
    lives."""

    config: TransformerConfig
    device: torch.device

    def __call__(self, positive: TextEmbeddings, negative: TextEmbeddings | None, latent: AVLatent,
                 stage: Stage[Lora], generator: torch.Generator, *,
                 progress: Callable[[int, int], None] | None = None) -> AVLatent: ...


class LocalSampler:
    """Stages on a transformer in this process. `cuda_graphs`: each stage captures its step on its first step;
    "auto" (the default) where the step is capturable (`compile.use_graphs`: CUDA, every block resident, one GPU:
    `one_gpu` and no CFG-parallel `runner`; no step cache), eagerly elsewhere; True refuses where it is not. `passes_per_forward`
    None: each stage's from the device's measured policy (`memory.pass_policy`, by the stage's video tokens) on one
    GPU, every pass in one forward on several (`one_gpu` False: this process is one rank of a parallel run, whose
    forwards were not measured). `should_stop` (a host flag) is read before every transformer block, or between
    steps when the step is captured: True stops the stage with `errors.Interrupted` (`stages.sample`)."""

    def __init__(self, model: LTX2Transformer, *, cuda_graphs: GraphSetting = "auto",
                 passes_per_forward: int | None = None, runner: RunnerFactory | None = None,
                 observe: Observer | None = None, should_stop: Callable[[], bool] | None = None,
                 one_gpu: bool = True) -> None:
        self.device = next(model.parameters()).device
        cuda_graphs = graph_setting(cuda_graphs)
        if cuda_graphs is True and self.device.type != "cuda":
            raise ValueError("cuda_graphs needs the models on a CUDA device; switch it off on the CPU")
        self.model, self.config, self.cuda_graphs = model, model.config, cuda_graphs
        self.passes_per_forward, self.runner, self.observe = passes_per_forward, runner, observe
        self.should_stop, self.one_gpu = should_stop, one_gpu and runner is None

    def __call__(self, positive: TextEmbeddings, negative: TextEmbeddings | None, latent: AVLatent,
                 stage: Stage[Lora], generator: torch.Generator, *,
                 progress: Callable[[int, int], None] | None = None) -> AVLatent:
        if latent.video is None and self.runner is not None:
            raise ValueError(ONE_GPU)
        if stage.cache is not None and self.cuda_graphs is True:
            raise ValueError("step caching decides on the host between steps and a captured CUDA graph replays whole "
                             "steps: set cuda_graphs to auto (eager steps under the cache) or off")
        if stage.sampler == "res_2s" and self.cuda_graphs is True:
            raise ValueError("res_2s steps are not captured as CUDA graphs: set cuda_graphs to auto (eager res_2s "
                             "steps) or off")
        graphs = (stage.cache is None and stage.sampler == "euler"
                  and use_graphs(self.cuda_graphs, self.model, one_gpu=self.one_gpu))
        tokens = 0 if latent.video is None else latent.video[0, 0].numel()
        policy = policy_cap(device_capability(self.device), tokens) if self.one_gpu else None
        passes_per_forward = self.passes_per_forward or policy
        fused = replace(stage, loras=())  # fused here for this stage only; `sample` takes the weights as they are
        with fused_loras(self.model, stage.loras) if stage.loras else contextlib.nullcontext():
            return sample(self.model, positive, negative, latent, fused, generator,
                          step=CudaGraphStep() if graphs else guided_step, progress=progress,
                          observe=self.observe, passes_per_forward=passes_per_forward, runner=self.runner,
                          should_stop=self.should_stop)
