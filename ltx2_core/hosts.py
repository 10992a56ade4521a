"""Where the transformer runs: here (`LocalHost`, one process, maybe under a memory plan) or on persistent workers
(`WorkerHost`, one process per device). Both give what a caller needs, so nothing above them asks which one it
has: the transformer's config, the device the sampling generator lives on, a sampler for a run (with LoRAs fused
while it runs, previews, compile), the decode tiles, the video decode spread over the host's devices (`video_decode`:
workers; None: the caller's decoder alone), the text encoder spread over the workers (`prompt_encoder`; None: the
caller loads it) and a memory check that fit the host, and `release()`.

`transformer` and `workers` say what a host holds (the other is None); they are for inspection, not for branching.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple, Protocol

import numpy as np
import torch

from ltx2_core.compile import GraphSetting, compile_blocks, graph_setting
from ltx2_core.loader.lora import Lora, fused_loras
from ltx2_core.memory.footprint import Job, ModelSizes
from ltx2_core.memory.plan import MemoryPlan
from ltx2_core.memory.request_check import request_problem
from ltx2_core.model.decoders import Decoders
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.model.transformer.attention_select import check_attention, device_table, use_attention
from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.model.video_vae.tiling import TilingConfig
from ltx2_core.stage_samplers import LocalSampler, StageSampler
from ltx2_core.runtime import Controller, WorkerDecode, WorkerSampler
from ltx2_core.runtime.text_task import LoadEncoder, WorkerPromptEncoder
from ltx2_core.stages import VideoDecode


class Previews(Protocol):
    """Per-step preview images of a run (`preview.LatentPreview`, `preview.StagePreviews`): `projection` (the
    decoder's `rgb_projection`) for workers that draw them, `observe` for a sampler here, `ready` for the newest."""

    projection: tuple[torch.Tensor, torch.Tensor]

    def observe(self, video_tokens: torch.Tensor, audio_tokens: torch.Tensor) -> None: ...

    def ready(self) -> np.ndarray | None: ...


class HostedSampler(NamedTuple):
    """A host's sampler for one run (`with host.sampler(...) as (sample, preview):`): `sample` (a pipeline
    `StageSampler`) and `preview` (returns the newest preview image not yet shown, or None; itself None when no
    previews were asked for)."""

    sample: StageSampler
    preview: Callable[[], np.ndarray | None] | None


class Host(Protocol):
    """Where the transformer runs (module docstring)."""

    config: TransformerConfig
    device: torch.device  # where the sampler's generator lives
    memory: MemoryPlan | None  # what stays on the device (None: everything, or not planned here)
    transformer: LTX2Transformer | None
    workers: Controller | None
    # `stages.decode`'s `video_decode` (the tiles over the workers, the model's own decoder given); None: decode here
    video_decode: VideoDecode | None

    def sampler(self, loras: Sequence[tuple[Lora, float]] = (), *, previews: Previews | None = None,
                compile: bool = False, cuda_graphs: GraphSetting = "auto",
                should_stop: Callable[[], bool] | None = None) -> contextlib.AbstractContextManager[HostedSampler]:
        """A sampler for one run with `loras` on the transformer while the run lasts (every stage), restored after
        it. `should_stop` (a host flag such as ComfyUI's interrupt) is read before every transformer block (between
        steps when the step is captured), here or by every worker: the run then raises `errors.Interrupted`.
        `cuda_graphs`: "auto" captures each step as a CUDA graph where it can (CUDA, every block resident, one
        GPU) and runs it eagerly elsewhere; True refuses where it cannot; False never captures."""

    def memory_problem(self, job: Job, decoders: Decoders | None = None, upsampler: torch.nn.Module | None = None,
                       *, video_here: bool = False) -> str | None:
        """Why `job` cannot run now with this host's transformer, `decoders` and `upsampler` (their widths;
        `footprint.request_problem`: every stage against the free memory of the device and the host), before
        anything is allocated; None when it fits or the free memory is unknown. `video_here`: the video is decoded
        in this process even where the host has a `video_decode` (HDR's float32 decode)."""

    def tiling(self) -> TilingConfig: ...

    def prompt_encoder(self, load: LoadEncoder, check: Callable[[], object] | None = None
                       ) -> WorkerPromptEncoder | None:
        """The text encoder of `load` spread over this host's workers (`runtime.text_task`; MemoryPlanError when it
        fits none of their layouts), or None where the caller loads it itself (here, or a single worker)."""

    def release(self) -> None: ...


class LocalHost:
    """The transformer in this process on `device`, computing in `dtype`, placed by `memory` (None: resident), its
    attention run by the `attention` backend (`attention_select.MODES`, checked against the device here)."""

    workers = None
    video_decode = None

    def __init__(self, transformer: LTX2Transformer, device: torch.device | str, dtype: torch.dtype,
                 memory: MemoryPlan | None = None, attention: str = "auto") -> None:
        self.transformer, self.device, self.dtype, self.memory = transformer, torch.device(device), dtype, memory
        self.config = transformer.config
        self._head_dims = (self.config.video.head_dim, self.config.audio.head_dim)
        check_attention(attention, device_table(self.device), dtype, self._head_dims)
        self.attention = attention
        self._compiled = False

    @contextlib.contextmanager
    def sampler(self, loras: Sequence[tuple[Lora, float]] = (), *, previews: Previews | None = None,
                compile: bool = False, cuda_graphs: GraphSetting = "auto",
                should_stop: Callable[[], bool] | None = None) -> Iterator[HostedSampler]:
        """The LoRAs are fused once for the whole run."""
        cuda_graphs = graph_setting(cuda_graphs)
        if (compile or cuda_graphs is True) and self.memory is not None and self.memory.streamed_blocks > 0:
            raise ValueError("compile and cuda_graphs need every block resident; set the loader's memory to "
                             "resident or switch them off")
        if compile and not self._compiled:
            compile_blocks(self.transformer)
            self._compiled = True
        sampler = LocalSampler(self.transformer, cuda_graphs=cuda_graphs,
                               observe=previews.observe if previews is not None else None,
                               passes_per_forward=None if self.memory is None else self.memory.passes_per_forward,
                               should_stop=should_stop)
        with fused_loras(self.transformer, loras) if loras else contextlib.nullcontext(), \
                use_attention(self.attention, self.device, self.dtype, self._head_dims):
            yield HostedSampler(sampler, previews.ready if previews is not None else None)

    def memory_problem(self, job: Job, decoders: Decoders | None = None, upsampler: torch.nn.Module | None = None,
                       *, video_here: bool = False) -> str | None:
        """The passes of one forward capped as the memory plan caps them (the video is always decoded here)."""
        cap = None if self.memory is None else self.memory.passes_per_forward
        sizes = ModelSizes.of(self.config, self.dtype, decoders, upsampler, passes_per_forward=cap)
        return request_problem(job, sizes, self.device)

    def tiling(self) -> TilingConfig:
        return TilingConfig() if self.memory is None else self.memory.tiling()

    def prompt_encoder(self, load: LoadEncoder, check: Callable[[], object] | None = None) -> None:
        return None

    def release(self) -> None:
        self.transformer.to("meta")


class WorkerHost:
    """The transformer sharded over the persistent workers of `workers` (a started `runtime.Controller`), their
    attention run by the `attention` backend (checked by the caller against the workers' device)."""

    transformer = None
    memory = None  # each worker holds its whole shard

    def __init__(self, workers: Controller, attention: str = "auto") -> None:
        self.workers, self.config, self.device = workers, workers.config, torch.device(workers.device_type)
        self.attention = attention
        self.video_decode = WorkerDecode(workers)  # each worker loads the video decoder at its first decode

    @contextlib.contextmanager
    def sampler(self, loras: Sequence[tuple[Lora, float]] = (), *, previews: Previews | None = None,
                compile: bool = False, cuda_graphs: GraphSetting = "auto",
                should_stop: Callable[[], bool] | None = None) -> Iterator[HostedSampler]:
        """The workers read `loras` from their files (once) and fuse them for each stage's job; rank 0 draws the
        previews."""
        if graph_setting(cuda_graphs) is True:  # "auto" runs the workers' steps eagerly
            raise ValueError("cuda_graphs is not available with a multi-GPU layout; switch it off (compile is)")
        sampler = WorkerSampler(self.workers, loras, should_stop, compile=compile,
                                preview=previews.projection if previews is not None else None,
                                attention=self.attention)
        yield HostedSampler(sampler, sampler.take_preview if previews is not None else None)

    def memory_problem(self, job: Job, decoders: Decoders | None = None, upsampler: torch.nn.Module | None = None,
                       *, video_here: bool = False) -> str | None:
        """Sampling's activations and the video decode's tiles (unless `video_here`) are not counted (each worker
        meets its own device's memory when the job runs); the rest is, on the device of the `decoders` (this
        process's)."""
        weight = next(decoders.video.parameters()) if decoders is not None else None
        sizes = ModelSizes.of(self.config, weight.dtype if weight is not None else torch.bfloat16, decoders, upsampler,
                              sampling_here=False, decoding_here=video_here)
        return request_problem(job, sizes, weight.device if weight is not None else self.device)

    def tiling(self) -> TilingConfig:
        return TilingConfig()

    def prompt_encoder(self, load: LoadEncoder, check: Callable[[], object] | None = None
                       ) -> WorkerPromptEncoder | None:
        if self.workers.layout.world_size == 1:
            return None
        return WorkerPromptEncoder(self.workers, load, check=check)

    def release(self) -> None:
        self.workers.shutdown()
