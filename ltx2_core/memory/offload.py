"""Modules that visit the device only while they run: the text side (Gemma's embeddings and norms, the text
projection and connectors) while the prompt is encoded, the video encoder while images are encoded, the upsampler
while it upsamples. Between their forwards they wait in host memory, so sampling has the device to itself.

`offload(module, device)` moves the module to the host and registers two hooks: before each forward the module and
its tensor arguments go to `device`, after it (also when it raises) the module goes back; its output stays on the
device. A module whose blocks stream (`stream_blocks`) keeps them streaming: its other tensors and the two slots
visit. Each visit copies the module's weights in (a pageable copy: about 1 s for the 6 GB of LTX-2.3's text
projection), once per prompt, image batch or upsampling, never inside a denoising step. The text projection visits
in its three parts (the feature extractor, then each connector), so encoding holds only the largest of them.
"""

from __future__ import annotations

import os

import torch
from torch import nn

from ltx2_core.loader.sources import Sources
from ltx2_core.loader.text_weights import load_prompt_encoder
from ltx2_core.memory.streaming import move_module, stream_blocks
from ltx2_core.model.text import PromptEncoder

HOST = torch.device("cpu")


def _to(value, device: torch.device):
    return value.to(device) if isinstance(value, torch.Tensor) else value


def offload(module: nn.Module, device: torch.device | str) -> nn.Module:
    """Keeps `module` on the host and runs each of its forwards on `device` (module docstring); returns it."""
    device = torch.device(device)
    if visiting_device(module) is not None:  # offloaded already: only the device changes
        object.__setattr__(module, "visits", device)
        return module
    streamer = getattr(module, "block_streamer", None)

    def park() -> None:
        if streamer is not None:
            streamer.park()
        else:
            move_module(module, HOST)

    def visit(_module, args, kwargs):
        if streamer is not None:
            streamer.unpark()
        else:
            move_module(module, module.visits)
        return tuple(_to(a, module.visits) for a in args), {k: _to(v, module.visits) for k, v in kwargs.items()}

    park()
    module.register_forward_pre_hook(visit, with_kwargs=True)
    module.register_forward_hook(lambda *_: park(), always_call=True)
    object.__setattr__(module, "visits", device)  # not a submodule attribute: no state dict entries
    return module


def visiting_device(module: nn.Module) -> torch.device | None:
    """The device an offloaded module runs on (None: it stays where it is)."""
    return getattr(module, "visits", None)


def load_streamed_prompt_encoder(text_encoder: str | os.PathLike, checkpoint: Sources | str | os.PathLike, *,
                                 device: torch.device | str, dtype: torch.dtype | None = None,
                                 max_length: int | None = None, pin: bool = True) -> PromptEncoder:
    """`loader.text_weights.load_prompt_encoder` with Gemma's decoder layers kept in host memory (pinned unless `pin`
    is False) and streamed to `device` one at a time while encoding; its embeddings and norms and the projection
    visit `device` only while they run: a 16 GB card encodes without holding Gemma's 24 GB, and samples without the
    text side."""
    encoder = load_prompt_encoder(text_encoder, checkpoint, device=device, dtype=dtype, offload_device="cpu",
                                  max_length=max_length)
    return stream_text_encoder(encoder, device, pin)


def stream_text_encoder(encoder: PromptEncoder, device: torch.device | str, pin: bool = True) -> PromptEncoder:
    """A prompt encoder loaded on the host, made to encode on `device` holding little there: Gemma's decoder layers
    streamed from host memory (pinned unless `pin` is False), Gemma's other weights and each part of the text
    projection visiting while they run. Returns it."""
    stream_blocks(encoder.gemma, device, resident=0, blocks="layers", pin=pin)
    offload(encoder.gemma, device)
    for part in projection_parts(encoder.projection):
        offload(part, device)
    encoder.offload_device = None
    return encoder


def projection_parts(projection: nn.Module) -> list[nn.Module]:
    """The parts of a text projection that run one after another (its forward's order): each visits alone."""
    return [projection.feature_extractor, projection.video_connector, projection.audio_connector]


def place_models(models, plan, device: torch.device | str):
    """A memory plan on the loaded models (`pipeline.Models`; the prompt encoder is placed by
    `load_streamed_prompt_encoder`): the transformer as planned, the video encoder and the upsampler visiting
    `device` for their stage. Returns the transformer's BlockStreamer (None when every block is resident)."""
    from ltx2_core.memory.plan import apply_memory_plan

    streamer = apply_memory_plan(models.transformer, plan, device)
    for module in (models.video_encoder, models.upsampler):
        if module is not None:
            offload(module, device)
    return streamer
