"""The models of a generation, from the official files or, without a checkpoint, the tiny random-weight demo.

`ModelFiles.check()` checks every path (existence, and the mode's required files) without reading a tensor, so a
wrong request fails before any model work; `load()` then reads them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import torch

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.loader import (
    read_header,
    transformer_config,
    load_audio_decoder,
    load_lora,
    load_transformer,
    load_upsampler,
    load_video_decoder,
    load_video_encoder,
    load_vocoder,
)
from ltx2_core.loader.safetensors_file import Shard
from ltx2_core.loader.sources import Component, Sources
from ltx2_core.loader.text_weights import load_prompt_encoder
from ltx2_core.memory.offload import load_streamed_prompt_encoder, place_models
from ltx2_core.memory.plan import MemoryPlan
from ltx2_core.quant.policy import quantize_blocks
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.pipeline import Models
from ltx2_core.model.decoders import Decoders

DEMO_LABEL = ("tiny random-weight DEMO model (LTX-{version} structure, not trained: expect noise, not a video of the "
              "prompt)")


@dataclass(frozen=True)
class ModelFiles:
    """Paths of a generation's models; `checkpoint` None selects the demo model of structure `version`."""

    checkpoint: str | None = None
    text_encoder: str | None = None
    upsampler: str | None = None
    distilled_lora: str | None = None
    loras: tuple[tuple[str, float], ...] = field(default_factory=tuple)
    version: str = "2.0"
    fp8: str = "auto"  # the transformer's weights: see quant.policy.FP8_MODES

    @property
    def label(self) -> str:
        return self.checkpoint or DEMO_LABEL.format(version=self.version)

    def check(self, mode: str) -> None:
        """ValueError naming the fix for a missing file or one the mode needs; reads no tensor."""
        if self.checkpoint is None:
            given = [name for name in ("text_encoder", "upsampler", "distilled_lora") if getattr(self, name)]
            if given or self.loras:
                raise ValueError(f"--{(given or ['lora'])[0].replace('_', '-')} needs --checkpoint (the demo model "
                                 "builds its own random components)")
            return
        if self.text_encoder is None:
            raise ValueError("--checkpoint needs --text-encoder: Gemma 3 12B (ComfyUI's gemma_3_12B_it*.safetensors "
                             "or a Hugging Face folder)")
        if mode != "one-stage" and self.upsampler is None:
            raise ValueError(f"mode {mode} needs --upsampler ltx-2-spatial-upscaler-x2-*.safetensors")
        if mode == "two-stage" and self.distilled_lora is None:
            raise ValueError("mode two-stage needs --distilled-lora ltx-2-19b-distilled-lora-*.safetensors")
        paths = [("--checkpoint", self.checkpoint), ("--text-encoder", self.text_encoder),
                 ("--upsampler", self.upsampler), ("--distilled-lora", self.distilled_lora)]
        paths += [("--lora", path) for path, _ in self.loras]
        for flag, path in paths:
            if path is not None:
                _check_path(flag, path)

    def sources(self) -> Sources:
        """Where each component's weights are: the model's from the bundled `checkpoint`, the upsampler from its
        own file (needs a checkpoint; the demo has no files)."""
        return Sources.bundled(self.checkpoint).with_files({Component.UPSAMPLER: self.upsampler})

    def transformer_config(self) -> TransformerConfig:
        """The DiT's config, from the checkpoint's header only (or the demo's)."""
        if self.checkpoint is None:
            return TransformerConfig.tiny(self.version)
        return transformer_config(read_header(self.sources()[Component.TRANSFORMER].path))

    def load_transformer(self, device: torch.device | str = "cpu", dtype: torch.dtype | None = None,
                         parallelize: Callable[[LTX2Transformer], Mapping[str, Shard]] | None = None
                         ) -> LTX2Transformer:
        """The transformer alone (with `loras` fused), sharded by `parallelize` as in `load`."""
        if self.checkpoint is None:
            return self.load(device, dtype, parallelize).transformer
        return load_transformer(self.sources()[Component.TRANSFORMER], loras=self.loras, parallelize=parallelize,
                                device=device, dtype=dtype, fp8=self.fp8)

    def load(self, device: torch.device | str = "cpu", dtype: torch.dtype | None = None,
             parallelize: Callable[[LTX2Transformer], Mapping[str, Shard]] | None = None,
             plan: MemoryPlan | None = None) -> Models:
        """Every model of the generation; `parallelize` (tensor parallelism) shards the transformer: a checkpoint's
        on the meta model so this rank reads only its shards, the demo's after it is built. `plan` (a memory
        plan): its streamed blocks are loaded into host memory and streamed to `device`; the text side, the video
        encoder and the upsampler visit `device` only for their stage (`ltx2_core.memory.offload`)."""
        models = self._load(device, dtype, parallelize, streamed=plan is not None and plan.streamed_blocks > 0,
                            plan=plan)
        if plan is not None:
            place_models(models, plan, device)
        return models

    def _load(self, device, dtype, parallelize, streamed: bool, plan: MemoryPlan | None) -> Models:
        if self.checkpoint is None:
            from ltx2_core.demo import demo_models  # the demo is built only when asked for

            models = demo_models(self.version, device, dtype)
            if self.fp8 == "quantize":  # before the shards are cut: tensor parallelism keeps them fp8
                quantize_blocks(models.transformer)
            if parallelize is not None:
                parallelize(models.transformer)
            return models
        load = dict(device=device, dtype=dtype)
        visiting = dict(device="cpu" if plan is not None else device, dtype=dtype)  # they visit the device (plan)
        sources = self.sources()
        transformer = load_transformer(sources[Component.TRANSFORMER], loras=self.loras, parallelize=parallelize,
                                       fp8=self.fp8, device="cpu" if streamed else device, dtype=dtype)
        return Models(
            transformer=transformer,
            # with a memory plan on a GPU, Gemma's layers stay in host memory and stream in while it encodes
            prompt_encoder=(load_streamed_prompt_encoder(self.text_encoder, sources, **load, pin=plan.pin)
                            if plan is not None and torch.device(device).type == "cuda" else
                            load_prompt_encoder(self.text_encoder, sources, **load)),
            decoders=Decoders(load_video_decoder(sources[Component.VIDEO_DECODER], **load),
                              load_audio_decoder(sources[Component.AUDIO_DECODER], **load),
                              # fp32: small and precision-bound
                              load_vocoder(sources[Component.VOCODER], device=device)),
            upsampler=load_upsampler(sources[Component.UPSAMPLER], **visiting) if self.upsampler else None,
            distilled_lora=load_lora(self.distilled_lora) if self.distilled_lora else None,
            video_encoder=load_video_encoder(sources[Component.VIDEO_ENCODER], **visiting),
        )


def _check_path(flag: str, path: str) -> None:
    """A model file that exists; a directory only for the text encoder, and then a Hugging Face model folder."""
    if not os.path.exists(path):
        raise ValueError(f"{flag} {path}: no such file; check the path (models usually live in "
                         "ComfyUI/models/checkpoints, text_encoders, latent_upscale_models and loras)")
    if not os.path.isdir(path):
        return
    if flag != "--text-encoder":
        raise ValueError(f"{flag} {path} is a directory, not a .safetensors file; pass the file inside it")
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise ValueError(f"{flag} {path} is a directory without config.json, so not a Hugging Face Gemma 3 folder; "
                         "pass ComfyUI's single file gemma_3_12B_it*.safetensors or the google/gemma-3-12b-it folder")
