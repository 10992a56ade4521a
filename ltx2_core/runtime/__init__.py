"""Multi-device generation behind one call: persistent workers (one process per device) sample and decode the video
(its tiles spread over them, `decode_task.WorkerDecode`), while the caller encodes the prompts, upsamples between
stages and decodes the sound (`generate_on_workers`, or any pipeline given a `WorkerSampler`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import torch

from ltx2_core.loader.lora import Lora
from ltx2_core.pipeline import SINGLE_PROCESS, Distribution, StageProgress, generate
from ltx2_core.request_models import Models
from ltx2_core.request import ONE_GPU, Request
from ltx2_core.runtime.controller import Controller, JobInterrupted, WorkerError
from ltx2_core.runtime.decode_task import WorkerDecode
from ltx2_core.runtime.float32_decode import float32_decode
from ltx2_core.runtime.protocol import StageJob
from ltx2_core.sampling.stage import Stage
from ltx2_core.stages import AVLatent, Generation, kept_sound
from ltx2_core.types import TextEmbeddings

__all__ = ["Controller", "JobInterrupted", "StageJob", "WorkerDecode", "WorkerError", "WorkerSampler",
           "generate_on_workers"]


class WorkerSampler:
    """A pipeline's `StageSampler` whose stages run on the controller's workers. `loras` (read from their files
    by the workers) are fused for every stage, before the stage's own; `should_stop` is polled while waiting (see
    `Controller.run`); `compile` compiles the workers' blocks on the first stage. With a `preview` projection
    (`ltx2_core.preview.rgb_projection`), rank 0 sends a preview image per step: `take_preview()` returns the
    newest one not yet taken. `attention` is the workers' attention backend (`attention_select.MODES`)."""

    def __init__(self, controller: Controller, loras: Sequence[tuple[Lora, float]] = (),
                 should_stop: Callable[[], bool] | None = None, compile: bool = False,
                 preview: tuple[torch.Tensor, torch.Tensor] | None = None, attention: str = "auto") -> None:
        self.controller, self.loras, self.should_stop, self.compile = controller, tuple(loras), should_stop, compile
        self.attention = attention
        self.config = controller.config
        self.device = torch.device(controller.device_type)
        self.projection = None if preview is None else tuple(t.detach().float().cpu() for t in preview)
        self.image: np.ndarray | None = None

    def take_preview(self) -> np.ndarray | None:
        image, self.image = self.image, None
        return image

    def _keep(self, image: np.ndarray) -> None:
        self.image = image

    def __call__(self, positive: TextEmbeddings, negative: TextEmbeddings | None, latent: AVLatent,
                 stage: Stage[Lora], generator: torch.Generator, *,
                 progress: Callable[[int, int], None] | None = None) -> AVLatent:
        if latent.video is None:
            raise ValueError(ONE_GPU)
        files = tuple((_file_of(lora), float(strength)) for lora, strength in (*self.loras, *stage.loras))
        audio = None if latent.audio is None else latent.audio.cpu()  # None: a video-only stage (DFR's rounds)
        job = StageJob(AVLatent(latent.video.cpu(), audio, latent.fps), positive.to("cpu"),
                       None if negative is None else negative.to("cpu"), generator.get_state(),
                       replace(stage.cpu(), loras=files), self.compile, self.projection, self.attention)
        video, audio, state, keyframes = self.controller.run(job, progress, self.should_stop, self._keep)
        generator.set_state(state)
        return AVLatent(video, audio, latent.fps, kept_sound(latent, stage), keyframes)


def _file_of(lora: Lora) -> str:
    """The file the workers read `lora` from, checked here: a missing file is the caller's error, not the workers'."""
    if lora.path is None:
        raise ValueError(f"LoRA {lora.name} was built in memory; workers read LoRAs from files: save it with "
                         "safetensors and load it with load_lora")
    if not os.path.isfile(lora.path):
        raise FileNotFoundError(f"LoRA file {lora.path} is gone (the workers read it from there): put it back, or "
                                "pick another LoRA")
    return lora.path


def generate_on_workers(controller: Controller, request: Request, models: Models,
                        progress: StageProgress | None = None, should_stop: Callable[[], bool] | None = None, *,
                        decode_on_workers: bool = True) -> Generation:
    """`request` end to end with the sampling on the controller's workers; `models` (its transformer may be None)
    encode, upsample and decode the sound here. The video is decoded across the workers (`models.decoders.video`
    must be the decoder of the workers' files and dtype: ValueError otherwise; HDR's in float32 there,
    `float32_decode`), or here with `decode_on_workers` False. Not text to audio (`request.audio_only`: ValueError),
    which runs on one GPU."""
    if request.audio_only:
        raise ValueError(ONE_GPU)
    decode = WorkerDecode(controller, should_stop)
    decode = float32_decode(decode) if request.mode == "hdr" else decode
    distribution = Distribution(video_decode=decode) if decode_on_workers else SINGLE_PROCESS
    return generate(request, models, progress, sampler=WorkerSampler(controller, should_stop=should_stop),
                    distribution=distribution)
