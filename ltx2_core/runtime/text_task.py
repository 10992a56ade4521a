"""The prompt encoder on the persistent workers (issue 38, item 2): ComfyUI's workers hold the transformer; with
these tasks (`protocol.Task`, run by `Controller.call` on every rank over the workers' group) they also hold Gemma
and the text projection, spread as `memory.text_layout` plans it from each worker's room (`parallel.text_encode`):
a whole replica per worker, the positive and negative prompts encoded on different ranks ("prompts"), or Gemma's
layers as a pipeline over the workers ("pipeline").

    encoder = WorkerPromptEncoder(controller, LoadEncoder(path, sources, dtype))  # loads on every worker, or finds
    positive, negative = encoder.encode("a red car", "blurry")                    # CPU embeddings from rank 0
    encoder.release()                                                             # frees it on the workers

Each worker plans the layout from the text encoder files' headers and the workers' rooms, gathered over their
group, before any weight is read (`parallel.text_load.plan_from_files`, as the command line under torchrun), then
reads only what the layout gives its rank (`part_for`: a pipeline rank its layers, rank 0 also the embeddings, the
last rank the final norm and projection, the rest left on `meta`; "prompts": the whole), so no pipeline rank ever
holds the whole Gemma. It keeps that part in RAM and moves it to its device, to stay (`resident`) or for each task
only. What a worker loaded stays in its `TaskContext.kept` across jobs, keyed by the `LoadEncoder` (path, sources,
dtype, ...): a second encode finds it, another load replaces it; an encode on workers that restarted since loads it
again. Prompt enhancement samples text with the whole model on one rank: rank 0 runs it where it holds a whole
replica ("prompts"); a pipeline refuses it, naming the fix.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from ltx2_core.loader.sources import Sources
from ltx2_core.loader.text_weights import load_prompt_encoder
from ltx2_core.memory.plan import MemoryPlanError
from ltx2_core.memory.text_file_bytes import text_skeleton
from ltx2_core.memory.text_layout import TextLayout
from ltx2_core.model.text import PromptEncoder
from ltx2_core.parallel.text_encode import SpreadEncoder
from ltx2_core.parallel.text_load import part_for, plan_from_files
from ltx2_core.runtime.controller import Controller, WorkerError
from ltx2_core.runtime.protocol import TaskContext
from ltx2_core.types import TextEmbeddings

KEPT = "prompt encoder"  # TaskContext.kept: the `Held` encoder of this worker
LOADS = "prompt encoder loads"  # TaskContext.kept: how many times this worker loaded one (for the tests)


class Held(NamedTuple):
    """A worker's encoder: the load that made it and its spread stand-in."""

    load: LoadEncoder
    encoder: SpreadEncoder


class Loaded(NamedTuple):
    """What a load tells the caller: the layout (None when refused), why it was refused, this rank's load count."""

    layout: TextLayout | None
    refusal: str | None
    loads: int


class LoadEncoder(NamedTuple):
    """Loads the prompt encoder on every worker (once: a worker already holding this load keeps it; another load
    it held is freed first). `budget`: each rank's bytes for the plan (None: its device's free memory, or on the
    CPU its free RAM, measured before the encoder loads). A plan that fits no layout is returned as `refusal`, so
    the workers keep running (a failed task restarts them). `resident` False: a GPU worker keeps its part in RAM
    and moves it to its device for each task (the device's memory is the sampling's between prompts)."""

    path: str
    sources: Sources
    dtype: torch.dtype | None = None
    max_length: int | None = None
    budget: int | None = None
    resident: bool = True

    def run(self, context: TaskContext) -> Loaded:
        try:
            held = _held(self, context)
        except MemoryPlanError as refused:  # every rank plans from the same gathered rooms: all refuse alike
            return Loaded(None, str(refused), context.kept.get(LOADS, 0))
        return Loaded(held.encoder.layout, None, context.kept[LOADS])


class Encode(NamedTuple):
    """Encodes `prompts` on every worker: `batch` False, (positive, negative or None) as `PromptEncoder.encode`
    (`prompts` = (positive,) or (positive, negative)); True, one `TextEmbeddings` of batch len(prompts). Rank 0
    returns them on the CPU."""

    load: LoadEncoder
    prompts: tuple[str, ...]
    batch: bool = False

    def run(self, context: TaskContext):
        with _on_device(_held(self.load, context), context.device) as encoder:
            if self.batch:
                return _cpu(encoder.encode_batch(list(self.prompts)))
            positive, negative = encoder.encode(*self.prompts)
            return _cpu(positive), None if negative is None else _cpu(negative)


class Enhance(NamedTuple):
    """Prompt enhancement (`model.text.enhance.enhance_prompt`) by rank 0's whole replica; the others wait."""

    load: LoadEncoder
    prompt: str
    seed: int
    image: np.ndarray | None
    system_prompt_file: str | None
    max_new_tokens: int | None

    def run(self, context: TaskContext):
        from ltx2_core.model.text.enhance import enhance_prompt

        held = _held(self.load, context)
        if context.rank != 0:
            return None
        with _on_device(held, context.device) as encoder:
            return enhance_prompt(encoder.inner, self.prompt, seed=self.seed, image=self.image,
                                  system_prompt_file=self.system_prompt_file, max_new_tokens=self.max_new_tokens)


class Release(NamedTuple):
    """Frees the encoder `load` made, if the worker holds it (a newer load's stays); True where one was freed."""

    load: LoadEncoder

    def run(self, context: TaskContext) -> bool:
        held = context.kept.get(KEPT)
        if held is None or held.load != self.load:
            return False
        _free(context)
        return True


def _held(load: LoadEncoder, context: TaskContext) -> Held:
    """This worker's encoder for `load`, loaded and spread here (collective) unless it holds it already."""
    held = context.kept.get(KEPT)
    if held is not None and held.load == load:
        return held
    if held is not None:
        _free(context)  # one encoder per worker: the previous load goes first
    skeleton = text_skeleton(load.path, load.sources, dtype=load.dtype, max_length=load.max_length)  # headers only
    layout = plan_from_files(skeleton, context.device, budget=load.budget)  # the workers' rooms gathered: collective
    encoder = load_prompt_encoder(load.path, load.sources, device=context.device, dtype=load.dtype,
                                  offload_device="cpu", max_length=load.max_length,
                                  part=part_for(layout, context.rank))  # in RAM: this rank's part only
    context.kept[LOADS] = context.kept.get(LOADS, 0) + 1
    encoder.offload_device = None  # this module moves what the rank holds (`_on_device`)
    if load.resident:
        _move(encoder, context.device)
    context.kept[KEPT] = Held(load, SpreadEncoder(encoder, layout))
    return context.kept[KEPT]


@contextlib.contextmanager
def _on_device(held: Held, device: torch.device) -> Iterator[SpreadEncoder]:
    """The held encoder, its part on `device` while the block runs and back in RAM after (unless resident)."""
    if held.load.resident or device.type == "cpu":
        yield held.encoder
        return
    _move(held.encoder.inner, device)
    try:
        yield held.encoder
    finally:
        _move(held.encoder.inner, torch.device("cpu"))
        torch.cuda.empty_cache()


def _move(encoder: PromptEncoder, device: torch.device) -> None:
    """What the rank holds of Gemma and the projection onto `device`."""
    moved: dict[int, torch.Tensor] = {}
    for module in (encoder.gemma, encoder.projection):
        if module is not None:
            _move_held(module, device, moved)


def _move_held(module: nn.Module, device: torch.device, moved: dict[int, torch.Tensor]) -> None:
    """Every tensor of `module` that is not on `meta` (what a pipeline rank dropped) onto `device`, a tensor shared
    by several modules (tied weights) moved once."""
    for sub in module.modules():
        for table, wrap in ((sub._parameters, True), (sub._buffers, False)):
            for name, tensor in list(table.items()):
                if tensor is None or tensor.is_meta:
                    continue
                if id(tensor) not in moved:
                    data = tensor.data.to(device)
                    moved[id(tensor)] = nn.Parameter(data, tensor.requires_grad) if wrap else data
                table[name] = moved[id(tensor)]


def _free(context: TaskContext) -> None:
    held = context.kept.pop(KEPT)
    held.encoder.inner.release()
    del held
    gc.collect()
    if context.device.type == "cuda":
        torch.cuda.empty_cache()


def _cpu(embeddings: TextEmbeddings) -> TextEmbeddings:
    return TextEmbeddings(*(t.cpu() for t in embeddings))


class WorkerPromptEncoder:
    """Stands in for a `PromptEncoder` whose weights the workers of `workers` hold (`LoadEncoder` `load`, loaded
    here on construction: MemoryPlanError naming the fix when no layout fits). `encode` / `encode_batch` return
    CPU embeddings, `enhance_prompt` (what `model.text.enhance.enhance_prompt` defers to) the enhanced text.
    `check` is called before each task (e.g. the model handle's `check_loaded`: the workers of a released model
    are never started again for its encoder)."""

    def __init__(self, workers: Controller, load: LoadEncoder, check: Callable[[], object] | None = None) -> None:
        self.workers, self.load, self.check, self.released = workers, load, check, False
        self.device, self.dtype = torch.device("cpu"), load.dtype  # where the embeddings come back
        loaded = self._call(load)
        if loaded.layout is None:
            raise MemoryPlanError(loaded.refusal)
        self.layout: TextLayout = loaded.layout

    def describe(self) -> str:
        return f"{self.layout.describe()} (on the model's {self.workers.layout.world_size} workers)"

    def encode(self, positive: str, negative: str | None = None) -> tuple[TextEmbeddings, TextEmbeddings | None]:
        """Both prompts on the workers (each batch 1); returns (positive, negative or None)."""
        return self._call(Encode(self.load, (positive,) if negative is None else (positive, negative)))

    def encode_batch(self, prompts: Sequence[str]) -> TextEmbeddings:
        """Any number of prompts on the workers -> TextEmbeddings with batch len(prompts)."""
        return self._call(Encode(self.load, tuple(prompts), batch=True))

    def enhance_prompt(self, prompt: str, *, seed: int = 42, image: np.ndarray | None = None,
                       system_prompt_file: str | Path | None = None, max_new_tokens: int | None = None):
        """`model.text.enhance.enhance_prompt` run by rank 0 (its whole replica); refused for a pipeline."""
        if self.layout.mode == "pipeline":
            raise ValueError("prompt enhancement samples text with the whole Gemma on one device, and the workers "
                             "hold it as a pipeline (its layers split, it fits no worker whole): switch "
                             "enhance_prompt off, free memory on the workers' devices, or load the model without "
                             "the parallel layout")
        path = None if system_prompt_file is None else str(system_prompt_file)
        return self._call(Enhance(self.load, prompt, seed, image, path, max_new_tokens))

    def release(self) -> None:
        """Frees the encoder on the workers (nothing to do where they are stopped: it went with them; a release that
        fails leaves workers that start again, without it, with the next job)."""
        if not self.released and self.workers.workers.active and not self.workers.workers.dead():
            with contextlib.suppress(WorkerError):
                self.workers.call(Release(self.load))
        self.released = True

    def _call(self, task):
        if self.released:
            raise RuntimeError("this prompt encoder was released; load it again to encode prompts")
        if self.check is not None:
            self.check()
        return self.workers.call(task)
