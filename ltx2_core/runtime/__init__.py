"""Multi-device generation behind one call: persistent workers (one process per device) run the sampling, while the
caller encodes the prompts and decodes the result once (`generate_on_workers`)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ltx2_core.config import TransformerConfig
from ltx2_core.model.text import PromptEncoder
from ltx2_core.pipeline import Request, encode_request
from ltx2_core.runtime.controller import Controller, JobInterrupted, WorkerError
from ltx2_core.stages import Generation, decode
from ltx2_core.types import Decoders

__all__ = ["Controller", "JobInterrupted", "WorkerError", "generate_on_workers"]


def generate_on_workers(controller: Controller, request: Request, config: TransformerConfig,
                        prompt_encoder: PromptEncoder, decoders: Decoders,
                        progress: Callable[[str, int, int], None] | None = None) -> Generation:
    """`request` with the prompts encoded and the media decoded here, the sampling on the controller's workers."""
    request.check()
    positive, negative = encode_request(request, prompt_encoder, config)
    latent, state = controller.sample(request, positive.to("cpu"), None if negative is None else negative.to("cpu"),
                                      progress)
    device = next(decoders.video.parameters()).device
    generator = torch.Generator(device)
    if state.device.type == "cpu" and device.type == "cpu":  # the decode noise continues the workers' generator
        generator.set_state(state)
    else:
        generator.manual_seed(request.seed)
    return decode(latent, decoders, generator=generator)
