"""The values our own socket types carry between the pack's nodes (ComfyUI's types are used at the edges)."""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import torch

from ltx2_core import Lora, TextEmbeddings, TransformerConfig
from ltx2_core.conditioning.control import ControlCondition
from ltx2_core.hosts import Host
from ltx2_core.loader.lora import reference_downscale_factor
from ltx2_core.loader.sources import Sources
from ltx2_core.memory.plan import MemoryPlan
from ltx2_core.model.audio_vae import AudioEncoder
from ltx2_core.model.duration_head import DurationHead
from ltx2_core.model_files import ModelFiles
from ltx2_core.model.video_vae import VideoEncoder
from ltx2_core.parallel import ParallelConfig
from ltx2_core.model.decoders import Decoders
from ltx2_core.video_io import VideoFrames

MODEL, TEXT_ENCODER, CONDITIONING = "LTX2_MODEL", "LTX2_TEXT_ENCODER", "LTX2_CONDITIONING"
GUIDANCE, UPSAMPLER = "LTX2_GUIDANCE", "LTX2_UPSAMPLER"
LATENT = "LATENT"  # ComfyUI's own: a native LTX-2 latent dict both ways (nodes/interop.py)
PARALLEL = "LTX2_PARALLEL"
AUDIO_CONDITION = "LTX2_AUDIO"  # a ltx2_core AudioCondition: a sound (Waveform), start 0, strength
GUIDES = "LTX2_GUIDES"  # a tuple of `Guide`s: control videos for an IC-LoRA
RETAKE = "LTX2_RETAKE"  # a ltx2_core Retake of frames in memory (VideoFrames) and their sound (Waveform or None)


class ModelHandle(NamedTuple):
    """LTX2_MODEL: where the transformer runs (`host`: here, or on persistent workers with a multi-device layout)
    and the model's VAEs and vocoder (`files`), which stay here on the device the user chose. `loras` are fused only
    while a sampler runs and restored afterwards, so a LoRA'd handle never changes the model a loader node has
    cached. `audio_encoder` encodes a sound to generate to (None where the model's files lack it). Nodes use the
    host's sampler and never ask which host it is."""

    host: Host
    decoders: Decoders
    video_encoder: VideoEncoder
    files: ModelFiles
    loras: tuple[tuple[Lora, float], ...] = ()
    audio_encoder: AudioEncoder | None = None
    duration_head: DurationHead | None = None  # LTX-2.5's clip length from the prompt (None: the files have none)

    def text_sources(self, text_encoder: str) -> Sources:
        """Where the text path's weights are with `text_encoder`: a bundle's projection and connectors, or LTX-2.5's
        connectors in the transformer file and its projection in the Gemma 4 file."""
        return replace(self.files, text_encoder=text_encoder).sources()

    @property
    def config(self) -> TransformerConfig:
        return self.host.config

    @property
    def memory(self) -> MemoryPlan | None:
        """What stays on the device (None: everything, or the workers hold their shards)."""
        return self.host.memory

    @property
    def weights(self) -> torch.Tensor:
        """A weight of this process's models: their device and dtype (the transformer's, also on workers); the video
        decoder's, which stays on the device (the encoder visits it only while it runs under a memory plan)."""
        return next(self.decoders.video.parameters())

    @property
    def streamed(self) -> bool:
        return self.memory is not None and self.memory.streamed_blocks > 0

    def modules(self) -> tuple[torch.nn.Module, ...]:
        """This process's modules of the handle (the transformer too when it runs here)."""
        return tuple(m for m in (self.host.transformer, self.video_encoder, self.audio_encoder, *self.decoders)
                     if m is not None)

    def release(self) -> None:
        """Frees every weight (they become `meta`) and stops the workers; the handle then refuses to run."""
        for module in (self.video_encoder, self.audio_encoder, self.duration_head, *self.decoders):
            if module is not None:
                module.to("meta")
        self.host.release()

    def checked_audio_encoder(self) -> AudioEncoder:
        """The audio VAE encoder (audio conditioning); ValueError naming the fix where the model's files lack it."""
        if self.audio_encoder is None:
            raise ValueError(f"audio conditioning needs the audio VAE encoder, and {self.files.label} has none; load "
                             "a released LTX-2 checkpoint (or LTX-2.5's audio VAE file), which carries it, or remove "
                             "the audio input")
        return self.audio_encoder

    def check_loaded(self) -> ModelHandle:
        if self.weights.is_meta:
            raise ValueError(f"the model of {self.files.label} was released when its loader node loaded another "
                             "checkpoint or ComfyUI unloaded all models; queue the workflow again to reload it")
        return self


class Guide(NamedTuple):
    """One control video of LTX2_GUIDES: `frames` (F, H, W, 3) float in [0, 1] (ComfyUI's IMAGE), its strength
    and attention strength; the IC-LoRA's downscale comes from the model's LoRAs when a sampler uses it."""

    frames: torch.Tensor
    strength: float = 1.0
    attention_strength: float = 1.0
    attention_mask: torch.Tensor | None = None  # ComfyUI's MASK (F, H, W) in [0, 1]: where the control is attended


NO_IC_LORA = ("a video guide steers the generation through an IC-LoRA (depth, pose, edges), and this model has no "
              "LoRA: add LTX-2 LoRA Loader with the IC-LoRA (e.g. ltx-2-19b-ic-lora-depth-control.safetensors from "
              "models/loras) between the model loader and this node, or remove the guides")


def control_conditions(guides: tuple[Guide, ...], model: ModelHandle, fps: float) -> tuple[ControlCondition, ...]:
    """The guides as ltx2_core controls at the downscale factor the model's LoRAs state (as the command line reads
    it from --lora); ValueError naming the fix when the model carries no LoRA."""
    if not guides:
        return ()
    if not model.loras:
        raise ValueError(NO_IC_LORA)
    factor = reference_downscale_factor([lora.path for lora, _ in model.loras if lora.path is not None])
    return tuple(ControlCondition(VideoFrames(guide.frames, float(fps)), guide.strength, factor,
                                  guide.attention_strength, guide.attention_mask) for guide in guides)


class Parallel(NamedTuple):
    """LTX2_PARALLEL: the layout, and the address torchrun-launched workers attach to (None: spawned here)."""

    layout: ParallelConfig
    attach: str | None = None


class Conditioning(NamedTuple):
    """LTX2_CONDITIONING: the encoded positive and negative prompt (negative None when not encoded)."""

    positive: TextEmbeddings
    negative: TextEmbeddings | None
