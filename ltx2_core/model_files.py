"""The models of a generation, from the official files or, without a checkpoint, the tiny random-weight demo.

`checkpoint` is an LTX-2 / LTX-2.3 single-file checkpoint (a bundle), an LTX-2.5 transformer file (the release's
other components then come from `text_encoder`, `vae` and `audio_vae`), or a folder holding LTX-2.5's files
(`resolved()` finds them by their headers, `loader.release_folder`). `ModelFiles.check()` checks every path
(existence, each file's kind and release from its header, and the mode's required files; `model_file_checks`) without
reading a tensor, so a wrong request fails before any model work; `load()` then reads them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.loader import (
    read_header,
    transformer_config,
    load_audio_decoder,
    load_audio_encoder,
    load_lora,
    load_transformer,
    load_upsampler,
    load_video_decoder,
    load_video_encoder,
    load_vocoder,
)
from ltx2_core.errors import CheckpointError
from ltx2_core.loader.gguf_file import gguf_transformer_config
from ltx2_core.loader.gguf_reader import is_gguf
from ltx2_core.loader.lora import lora_reference_scale
from ltx2_core.loader.release_folder import RELEASE_FILES, find_duration_head, find_release_files
from ltx2_core.loader.safetensors_file import Shard
from ltx2_core.loader.sources import BUNDLE, Component, Source, Sources, duration_head_source, video_vae_prefix
from ltx2_core.loader.text_parts import TextPart
from ltx2_core.loader.text_weights import load_prompt_encoder
from ltx2_core.loader.upsampler_weights import upsampler_config
from ltx2_core.model.upsampler import LatentUpsampler
from ltx2_core.loader.vae_weights import DIFFUSION, video_vae_kind
from ltx2_core.model_file_checks import ModelFileChecks, kind_of
from ltx2_core.memory.footprint import RELEASED_UPSAMPLER_CHANNELS, ModelSizes
from ltx2_core.memory.offload import load_streamed_prompt_encoder, place_models
from ltx2_core.memory.pass_policy import device_capability
from ltx2_core.memory.estimates import TILE_BYTES_512, decoder_bytes, duration_head_bytes, transformer_weight_bytes
from ltx2_core.memory.plan import MemoryPlan, plan_run
from ltx2_core.memory.weight_layout import file_layers
from ltx2_core.memory.sizes import SideBytes, diffusion_decode_bytes, ram_bytes, side_bytes, text_and_image_bytes
from ltx2_core.quant.fp8_matmul import set_fp8_matmul
from ltx2_core.quant.policy import quantize_blocks, stores_quantised
from ltx2_core.model.audio_vae import AudioEncoder, VocoderConfig
from ltx2_core.model.duration_head import DurationHead, load_duration_head
from ltx2_core.model.text import PromptEncoder
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.request_models import Models
from ltx2_core.releases import DEFAULT_VERSION
from ltx2_core.model.decoders import Decoders

DEMO_LABEL = ("tiny random-weight DEMO model (LTX-{version} structure, not trained: expect noise, not a video of the "
              "prompt)")


@dataclass(frozen=True)
class ModelFiles(ModelFileChecks):
    """Paths of a generation's models; `checkpoint` None selects the demo model of structure `version`."""

    checkpoint: str | None = None
    text_encoder: str | None = None
    upsampler: str | None = None
    distilled_lora: str | None = None
    loras: tuple[tuple[str, float], ...] = field(default_factory=tuple)
    version: str = DEFAULT_VERSION.value
    fp8: str = "auto"  # the transformer's weights: see quant.policy.FP8_MODES
    vae: str | None = None  # LTX-2.5's video VAE file (either decoder); with a bundle, replaces its video VAE
    audio_vae: str | None = None  # LTX-2.5's audio VAE file (audio decoder + vocoder); with a bundle, replaces them
    # an IC-LoRA run (control videos): every LoRA guides stage 1 only, as the reference's ICLoraPipeline, whose
    # stage 2 refines without its LoRAs, also those that state no reference_downscale_factor (the factor is then 1)
    controls: bool = False
    # with a GGUF or separate LTX-2 / 2.3 transformer: the text projection and the connectors the transformer file
    # lacks (ComfyUI's ltx-2*-embeddings_connector*.safetensors, or the official checkpoint)
    text_projection: str | None = None
    fp8_matmul: str = "auto"  # how fp8 weights multiply: see quant.fp8_matmul.CHOICES
    temporal_upsampler: str | None = None  # DFR's temporal x2 latent upsampler (its temporal rounds; not public yet)
    # LTX-2.5's duration head in a file of its own (a run of automatic length); None: the transformer file's, if any
    duration_head: str | None = None

    @property
    def label(self) -> str:
        """What the run loads, for its first line: the checkpoint (with the VAE files given beside it) or the demo."""
        if self.checkpoint is None:
            return DEMO_LABEL.format(version=self.version)
        beside = [os.path.basename(path) for path in (self.vae, self.audio_vae, self.text_projection,
                                                      self.duration_head) if path is not None]
        return self.checkpoint + (f" with {' and '.join(beside)}" if beside else "")

    @property
    def split(self) -> bool:
        """Whether `checkpoint` is a transformer file of its own (LTX-2.5's, a GGUF), whose components are separate
        files."""
        return self.checkpoint is not None and os.path.isfile(self.checkpoint) and \
            (is_gguf(self.checkpoint) or kind_of(self.checkpoint) == "transformer")

    def resolved(self, mode: str = "one-stage") -> ModelFiles:
        """These files with a folder `checkpoint` replaced by the files `mode` needs found in it (the ones given
        stay); these files as they are otherwise. CheckpointError when the folder lacks one or holds two."""
        if self.checkpoint is None or not os.path.isdir(self.checkpoint):
            return self
        given = {name: getattr(self, name) for name in RELEASE_FILES if name != "checkpoint"}
        return replace(self, **find_release_files(self.checkpoint, mode, given))

    def load_temporal_upsampler(self, device: torch.device | str = "cpu",
                                dtype: torch.dtype | None = None) -> LatentUpsampler | None:
        """DFR's temporal x2 upsampler from `temporal_upsampler` (found in a release folder for mode dfr), or None
        when no file is given."""
        path = self.resolved("dfr").temporal_upsampler if self.checkpoint else None
        return load_upsampler(path, device=device, dtype=dtype, temporal=True) if path else None

    def _diffusion_vae(self) -> bool:
        return video_vae_kind(read_header(self.vae, "video VAE")).decoder == DIFFUSION

    def with_duration_head(self) -> ModelFiles:
        """These files with the duration head beside a transformer file of its own when neither it nor
        `duration_head` holds one: the one duration head file of its release in the transformer's folder (headers
        only; ComfyUI's loader keeps it in models/diffusion_models); these files as they are otherwise."""
        if self.checkpoint is None or self.duration_head is not None or not self.split or self.has_duration_head():
            return self
        found = find_duration_head(Path(self.checkpoint).parent, self.transformer_config().version.value)
        return self if found is None else replace(self, duration_head=found)

    def has_duration_head(self) -> bool:
        """Whether the files carry LTX-2.5's duration head (a run of automatic length needs it); headers only. The
        demo model has none."""
        return self.checkpoint is not None and Component.DURATION_HEAD in self.sources()

    def has_audio_encoder(self) -> bool:
        """Whether the model's files carry the audio VAE encoder (audio conditioning needs it); headers only. The
        demo model has one."""
        return self.checkpoint is None or _audio_encoder_source(self.sources()) is not None

    def sources(self) -> Sources:
        """Where each component's weights are: the model's from the bundled `checkpoint` (its VAEs replaced by
        `vae` / `audio_vae` when given) or from LTX-2.5's files (`Sources.split`), the upsampler from its own file
        (needs a checkpoint; the demo has no files). A component whose file is not given is absent (CheckpointError
        when it is looked up)."""
        if self.checkpoint is not None and os.path.isdir(self.checkpoint):
            return self.resolved().sources()
        head = duration_head_source(self.checkpoint, self.duration_head)
        if self.split:  # a file not given yet leaves its components out (a loader node chooses the text encoder later)
            return Sources.split(self.checkpoint, self.text_encoder, self.vae, self.audio_vae, self.upsampler,
                                 self.text_projection).with_files({Component.DURATION_HEAD: head})
        sources = Sources.bundled(self.checkpoint).with_files({Component.UPSAMPLER: self.upsampler,
                                                               Component.DURATION_HEAD: head})
        if self.vae is not None:
            video = Source(Path(self.vae), video_vae_prefix(self.vae))
            sources = sources.with_files({Component.VIDEO_DECODER: video, Component.VIDEO_ENCODER: video})
        if self.audio_vae is not None:
            sources = sources.with_files({c: Source(Path(self.audio_vae), BUNDLE[c])
                                          for c in (Component.AUDIO_DECODER, Component.VOCODER)})
        return sources

    def transformer_config(self) -> TransformerConfig:
        """The DiT's config, from the checkpoint's header only (or the demo's)."""
        if self.checkpoint is None:
            return TransformerConfig.tiny(self.version)
        if os.path.isdir(self.checkpoint):
            return self.resolved().transformer_config()
        if is_gguf(self.checkpoint):
            return gguf_transformer_config(self.checkpoint)
        return transformer_config(read_header(self.checkpoint))

    def load_transformer(self, device: torch.device | str = "cpu", dtype: torch.dtype | None = None,
                         parallelize: Callable[[LTX2Transformer], Mapping[str, Shard]] | None = None
                         ) -> LTX2Transformer:
        """The transformer alone (a worker's model) with `loras` fused but the IC-LoRAs (the controller sends those
        as stage 1's LoRAs, from `load`'s `Models.ic_loras`), sharded by `parallelize` as in `load`."""
        if self.checkpoint is None:
            return self.load(device, dtype, parallelize).transformer
        model = load_transformer(self.resolved().sources()[Component.TRANSFORMER], loras=self.split_loras()[0],
                                 parallelize=parallelize, device=device, dtype=dtype, fp8=self.fp8)
        set_fp8_matmul(model, self.fp8_matmul, device)
        return model

    def load(self, device: torch.device | str = "cpu", dtype: torch.dtype | None = None,
             parallelize: Callable[[LTX2Transformer], Mapping[str, Shard]] | None = None,
             plan: MemoryPlan | None = None, *, text: bool = True) -> Models:
        """Every model of the generation; `parallelize` (tensor parallelism) shards the transformer: a checkpoint's
        on the meta model so this rank reads only its shards, the demo's after it is built. `plan` (a memory
        plan): its streamed blocks are loaded into host memory and streamed to `device`; the text side, the video
        encoder and the upsampler visit `device` only for their stage (`ltx2_core.memory.offload`). `text` False:
        a checkpoint's prompt encoder is left out (None; loaded later with `load_encoder`)."""
        return self._placed(self._load(device, dtype, parallelize, plan, text=text), plan, device)

    def _matmul(self, models: Models, device: torch.device | str) -> Models:
        """The transformer's fp8 linears set to multiply by `fp8_matmul` on `device` (where streamed blocks run)."""
        if models.transformer is not None:
            set_fp8_matmul(models.transformer, self.fp8_matmul, device)
        return models

    def load_checkpoint(self, device: torch.device | str = "cpu", dtype: torch.dtype | None = None,
                        plan: MemoryPlan | None = None, *, transformer: bool = True) -> Models:
        """The checkpoint's own models, for a caller that loads the text encoder and the upsampler itself (the
        loader nodes): the transformer (unless `transformer` is False: it runs on workers), the decoders and the
        video encoder, placed by `plan` as in `load`; the other fields are None."""
        if self.checkpoint is None:
            raise ValueError("load_checkpoint needs a checkpoint; the demo model loads whole with load()")
        return self._placed(self._load(device, dtype, None, plan, whole=False, transformer=transformer), plan, device)

    def model_sizes(self, dtype: torch.dtype | None = None) -> ModelSizes:
        """What the memory check counts of these files' models (`memory.footprint`), from the headers: the
        transformer's config, the compute dtype (`dtype`, else the files' bf16 or the demo's float32), the video
        decoder's width (the demo's; LTX-2.5's diffusion decoder), the upsampler's and the demo's vocoder's (a file's:
        the released 2.3 width, the wider one)."""
        files = self.resolved()
        if files.checkpoint is None:
            from ltx2_core.demo.decoders import DEMO_UPSAMPLER_WIDTH, DEMO_VAES, DEMO_VOCODERS  # only when asked for

            vocoder = VocoderConfig.from_metadata(DEMO_VOCODERS[files.version]).generator.initial_channels
            return ModelSizes(files.transformer_config(), dtype or torch.float32,
                              DEMO_VAES[files.version]["decoder_base_channels"],
                              upsampler_channels=DEMO_UPSAMPLER_WIDTH, vocoder_channels=vocoder)
        mid = upsampler_config(read_header(files.upsampler)).mid_channels if files.upsampler else None
        return ModelSizes(files.transformer_config(), dtype or torch.bfloat16,
                          diffusion=files.vae is not None and files._diffusion_vae(),
                          upsampler_channels=mid or RELEASED_UPSAMPLER_CHANNELS)

    def plan(self, device: torch.device | str, *, frames: int, height: int, width: int, passes: int,
             two_stage: bool = False, fps: float = 24.0, images: int = 0, dtype: torch.dtype | None = None,
             memory: str = "auto", budget: int | None = None, source: str | None = None,
             enhance: bool = False) -> MemoryPlan | None:
        """What stays on `device` for a request of this size (`passes` guidance passes; `two_stage` samples at half
        size first), made from the files' headers before any model loads; None when everything stays: `memory`
        "resident", or "auto" on the CPU without a `budget`. `memory` "stream" streams every block. `budget`
        (bytes): the device memory to plan for instead of what is free now (on the CPU: the RAM). `dtype`: the
        weights' (None: the files' own, which the streamed blocks can then be read from in place). The modules
        beside the transformer are counted from their files when the text encoder is known, else (a loader
        node, before the text encoder is chosen) with Gemma 3 12B's sizes on a GPU and not at all on the CPU,
        where they share the RAM the plan streams from (LTX-2.5's files: the decoders from the VAE files, the
        text projection from the text encoder file). `enhance`: the prompt is enhanced first (Gemma's KV cache and
        logits counted in the text stage). MemoryPlanError names the smallest change when nothing fits."""
        device = torch.device(device)
        cuda = device.type == "cuda"
        if memory == "resident" or (memory == "auto" and budget is None and not cuda):
            return None
        free = budget if budget is not None else torch.cuda.mem_get_info(device)[0] if cuda else ram_bytes() or 0
        files = self.resolved()
        config = files.transformer_config()
        weights_dtype = dtype or (torch.float32 if files.checkpoint is None else torch.bfloat16)
        quantised = stores_quantised(files.fp8, files.checkpoint)
        options = dict(fps=fps, dtype=weights_dtype, fp8_available=not quantised, stream_all=memory == "stream",
                       source=source or ("budget" if budget is not None else "free"),
                       ram=ram_bytes() if cuda else None, mappable=dtype is None and files.fp8 == "auto",
                       capability=device_capability(device))
        if files.checkpoint is not None:
            sources = files.sources()
            if files.text_encoder is not None:
                side = side_bytes(sources, files.text_encoder, files.upsampler, weights_dtype, images=images,
                                  frames=frames, height=height, width=width, enhance=enhance,
                                  temporal_upsampler=files.temporal_upsampler)
            else:
                side = text_and_image_bytes(sources, dtype, frames, height, width) if cuda else SideBytes()
            resident = decoder_bytes(sources) + duration_head_bytes(sources)  # beside the transformer for the run
            options |= dict(decoders=resident, tile_bytes_512=TILE_BYTES_512, side=side)
            if files.vae is not None and files._diffusion_vae():
                base, tile = diffusion_decode_bytes(frames, height, width)
                options |= dict(tile_bytes_512=tile, decode_base=base)
        weights = transformer_weight_bytes(config, weights_dtype, fp8=files.fp8 == "quantize", layers=None if
                                           files.checkpoint is None else file_layers(sources[Component.TRANSFORMER],
                                                                                     files.fp8))
        return plan_run(config, weights, free, frames, height, width, passes, two_stage, **options)

    @staticmethod
    def _placed(models: Models, plan: MemoryPlan | None, device: torch.device | str) -> Models:
        if plan is not None:
            place_models(models, plan, device)
        return models

    def _load(self, device, dtype, parallelize, plan: MemoryPlan | None, *, whole: bool = True,
              transformer: bool = True, text: bool = True) -> Models:
        if self.checkpoint is None:
            from ltx2_core.demo import demo_models  # the demo is built only when asked for

            models = demo_models(self.version, device, dtype)
            if self.fp8 == "quantize":  # before the shards are cut: tensor parallelism keeps them fp8
                quantize_blocks(models.transformer)
            if parallelize is not None:
                parallelize(models.transformer)
            return self._matmul(models, device)
        if os.path.isdir(self.checkpoint):
            return self.resolved()._load(device, dtype, parallelize, plan, whole=whole, transformer=transformer,
                                         text=text)
        load = dict(device=device, dtype=dtype)
        visiting = dict(device="cpu" if plan is not None else device, dtype=dtype)  # they visit the device (plan)
        streamed = plan is not None and plan.streamed_blocks > 0
        sources = self.sources()
        # the IC-LoRAs go around stage 1 (`Models.ic_loras`): by this process's sampler, or sent to the workers when
        # the transformer is theirs (`transformer` False); a tensor-parallel rank of a torchrun launch fuses them
        fused, ic_loras = self.split_loras() if parallelize is None else (self.loras, ())
        return self._matmul(Models(
            transformer=load_transformer(sources[Component.TRANSFORMER], loras=fused, parallelize=parallelize,
                                         fp8=self.fp8, device="cpu" if streamed else device, dtype=dtype)
            if transformer else None,
            prompt_encoder=self._prompt_encoder(sources, plan, device, dtype) if whole and text else None,
            decoders=Decoders(load_video_decoder(sources[Component.VIDEO_DECODER], **load),
                              load_audio_decoder(sources[Component.AUDIO_DECODER], **load),
                              # fp32: small and precision-bound
                              load_vocoder(sources[Component.VOCODER], device=device)),
            upsampler=load_upsampler(sources[Component.UPSAMPLER], **visiting) if whole and self.upsampler else None,
            distilled_lora=load_lora(self.distilled_lora) if whole and self.distilled_lora else None,
            video_encoder=load_video_encoder(sources[Component.VIDEO_ENCODER], **visiting),
            audio_encoder=_audio_encoder(sources, load),
            ic_loras=tuple((load_lora(path), strength) for path, strength in ic_loras),
            duration_head=_duration_head(sources, device),
            temporal_upsampler=load_upsampler(self.temporal_upsampler, temporal=True, **visiting)
            if whole and self.temporal_upsampler else None,
        ), device)

    def split_loras(self) -> tuple[tuple[tuple[str, float], ...], tuple[tuple[str, float], ...]]:
        """(the LoRAs fused at load, the IC-LoRAs): an IC-LoRA, a file whose metadata states a
        reference_downscale_factor, is fused around the first stage only (`Models.ic_loras`), as the reference's
        ICLoraPipeline refines stage 2 without it; every other LoRA stays fused in every stage, unless `controls` (an
        IC-LoRA run: every LoRA is the pipeline's, stage 1 only). Headers only."""
        if self.controls:
            return (), tuple(self.loras)
        ic = tuple((path, strength) for path, strength in self.loras if lora_reference_scale(path) is not None)
        return tuple(lora for lora in self.loras if lora not in ic), ic

    def load_text(self, device: torch.device | str = "cpu", dtype: torch.dtype | None = None
                  ) -> tuple[PromptEncoder, DurationHead | None]:
        """The prompt encoder and the duration head alone, for a run of automatic length that predicts its length
        before the memory plan (on CUDA Gemma's layers stream from host memory, as a plan would have them)."""
        if self.checkpoint is None:
            raise ValueError("load_text needs a checkpoint; the demo model loads whole with load()")
        files = self.resolved()
        sources = files.sources()
        if torch.device(device).type == "cuda":
            encoder = load_streamed_prompt_encoder(files.text_encoder, sources, device=device, dtype=dtype, pin=False)
        else:
            encoder = load_prompt_encoder(files.text_encoder, sources, device=device, dtype=dtype)
        return encoder, _duration_head(sources, device)

    def load_duration_head(self, device: torch.device | str = "cpu") -> DurationHead | None:
        """LTX-2.5's duration head alone (None where the files carry none), as `load_text` loads it."""
        return _duration_head(self.resolved().sources(), device)

    def load_encoder(self, device: torch.device | str = "cpu", dtype: torch.dtype | None = None,
                     part: TextPart | None = None) -> PromptEncoder:
        """The prompt encoder alone, whole or (`part`: a text pipeline's rank) only that part read from disk."""
        files = self.resolved()
        return load_prompt_encoder(files.text_encoder, files.sources(), device=device, dtype=dtype, part=part)

    def _prompt_encoder(self, sources: Sources, plan: MemoryPlan | None, device: torch.device | str,
                        dtype: torch.dtype | None) -> PromptEncoder:
        """With a memory plan on a GPU, Gemma's layers stay in host memory and stream in while it encodes."""
        if plan is not None and torch.device(device).type == "cuda":
            return load_streamed_prompt_encoder(self.text_encoder, sources, device=device, dtype=dtype, pin=plan.pin)
        return load_prompt_encoder(self.text_encoder, sources, device=device, dtype=dtype)


def _duration_head(sources: Sources, device: torch.device | str) -> DurationHead | None:
    """LTX-2.5's duration head where the files carry it (fp32: a few MB, and its exp amplifies rounding), else
    None (a run of automatic length is then refused: `duration.check_auto_frames`)."""
    if Component.DURATION_HEAD not in sources:
        return None
    source = sources[Component.DURATION_HEAD]
    head = load_duration_head(source.path, device=device)
    if head is None:
        raise CheckpointError(f"{source.path}: no duration_head.* tensors; give LTX-2.5's duration head file")
    return head


def _audio_encoder(sources: Sources, load: dict) -> AudioEncoder | None:
    """The audio VAE encoder (audio conditioning) where the model's files carry it (the released ones do; a file
    stripped of it loads without, and a request with audio is then refused by `check_request`)."""
    source = _audio_encoder_source(sources)
    return None if source is None else load_audio_encoder(source, **load)


def _audio_encoder_source(sources: Sources) -> Source | None:
    """Where the audio VAE encoder's weights are, or None where the files have none (header only)."""
    if Component.AUDIO_ENCODER not in sources:
        return None
    source = sources[Component.AUDIO_ENCODER]
    names = read_header(source.path, "audio VAE").tensors
    return source if any(name.startswith(source.key("encoder.")) for name in names) else None
