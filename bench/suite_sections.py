"""The five measurements of the GPU suite; each takes the run's Settings and returns its table rows (dicts).

* forward: one pass, ours vs ltx_core vs diffusers on the same weights, at three clip sizes, both structures;
* step: one guided step of the full-depth model, the passes batched vs one at a time vs the reference loop;
* launch: the launch-bound regime, a whole guided step eager vs CUDA graph vs per-block compile;
* syncs: host syncs of a whole denoising stage (sync debug mode and the profiler on CUDA, an op census on the CPU);
* recompiles: per-block compile, then every guidance scale changed: nothing may recompile;
* memory: a guided step per weight mode (bf16, fp8) with the device memory capped at 24 and 32 GB, as planned.
"""

from __future__ import annotations

import contextlib
import copy
import gc
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, NamedTuple

import torch

from denoise_step import reference_loop, reference_state
from ltx2_core.compile import CudaGraphStep, compile_blocks
from ltx2_core.model.transformer.config import TransformerConfig
from ltx2_core.memory.plan import (
    HEADROOM,
    MemoryPlanError,
    activation_bytes,
    apply_memory_plan,
    plan_memory,
    transformer_weight_bytes,
)
from ltx2_core.quant.policy import quantize_blocks
from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.sampling import GuidanceParams, denoise, guided_setup, guided_step, ltx2_sigmas, noised_state
from ltx2_core.sampling.denoise import StepSetup
from ltx2_core.sampling.guidance import default_guidance
from ltx2_core.sampling.steps import StreamState
from suite_measure import (PEAK_TFLOPS, forward_flops, in_forward_text_kv, median_ms, peak_extra_bytes,
                           step_flop_ms, synchronize, tflops)
from suite_models import REFERENCE_VERSIONS, Clip, clip, random_transformer, reference_of, suite_config
from support.census import OpCensus
from support.diffusers import diffusers_forward, diffusers_transformer

Row = dict[str, Any]
SYNC_EVENTS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


class Settings(NamedTuple):
    quick: bool
    device: torch.device
    dtype: torch.dtype
    versions: tuple[str, ...]
    slice_layers: int  # blocks of the full-width slice
    full_layers: int  # blocks of the full-depth model
    forward_sizes: tuple[tuple[int, int, int], ...]  # (frames, height, width)
    step_size: tuple[int, int, int]
    launch_sizes: tuple[tuple[int, int, int], ...]
    text_tokens: int
    steps: int  # of the denoising stage whose syncs are counted
    repeats: int
    warmup: int
    compile_backend: str


def forward(s: Settings) -> list[Row]:
    rows = []
    for version in s.versions:
        config = suite_config(version, s.slice_layers, s.quick)
        ours = random_transformer(config, s.device, s.dtype)
        ref, theirs = ((reference_of(ours), diffusers_transformer(config, ours.state_dict()))
                       if version in REFERENCE_VERSIONS else (None, None))
        for size in s.forward_sizes:
            rows.append(_forward_row(s, config, ours, ref, theirs, clip(config, size, s.text_tokens, s.device,
                                                                        s.dtype), size))
        del ours, ref, theirs
        _free(s.device)
    return rows


@torch.no_grad()
def _forward_row(s: Settings, config: TransformerConfig, ours: LTX2Transformer, ref: torch.nn.Module | None,
                 theirs: torch.nn.Module | None, c: Clip, size: tuple[int, int, int]) -> Row:
    """One size's row; a reference that cannot build this release (None) leaves its columns empty."""
    from ltx_core.guidance.perturbations import BatchedPerturbationConfig

    run = ours.prepare_run(c.video_positions, c.audio_positions, c.text.video, c.text.audio)  # once per run
    video, audio = c.streams()
    ref_video, ref_audio = c.reference_modalities()
    sides = {"ours": lambda: ours(video, audio, run)}
    if ref is not None:
        sides["ltx_core"] = lambda: ref(ref_video, ref_audio, BatchedPerturbationConfig.empty(1))
    if theirs is not None:
        sides["diffusers"] = lambda: diffusers_forward(theirs, config, c.video, c.audio, c.text, c.sigma,
                                                       c.video_positions, c.audio_positions)
    outputs = {name: fn()[0].float() for name, fn in sides.items()}
    ms = {name: median_ms(fn, s.device, s.repeats, s.warmup) for name, fn in sides.items()}
    tv, ta, text = c.tokens
    achieved = tflops(forward_flops(config, tv, ta, text, text_kv=in_forward_text_kv(config)), ms["ours"])
    scale = outputs["ours"].abs().max().item()
    row = {"version": config.version.value, "size": "×".join(map(str, size[::-1])), "video_tokens": tv,
           "audio_tokens": ta, "blocks": config.num_layers}
    for name in ("ours", "ltx_core", "diffusers"):
        row[f"{name}_ms"] = ms.get(name)
    for name in ("ltx_core", "diffusers"):
        row[f"vs_{name}"] = ms[name] / ms["ours"] if name in ms else None
    row |= {"tflops": achieved, "of_peak": achieved / PEAK_TFLOPS}
    for name in ("ltx_core", "diffusers"):
        row[f"diff_{name}"] = ((outputs["ours"] - outputs[name]).abs().max().item() / scale if name in outputs
                               else None)
    return row


class _Step(NamedTuple):
    setup: StepSetup
    video: StreamState
    audio: StreamState
    sigmas: torch.Tensor

    def __call__(self) -> tuple[torch.Tensor, torch.Tensor]:
        return guided_step(self.setup, self.video, self.audio, self.sigmas[0], self.sigmas[1])


def _guided(model: LTX2Transformer, c: Clip, steps: int, guidance: tuple[GuidanceParams, GuidanceParams] | None = None,
            passes_per_forward: int | None = None) -> _Step:
    """A guided step's set-up with the release's guidance (or `guidance`): passes, noised states, sigmas."""
    video_guidance, audio_guidance = guidance or default_guidance(model.config.version, model.config.num_layers)
    setup = guided_setup(model, c.text, c.negative, c.video_positions, c.audio_positions, video_guidance,
                         audio_guidance, passes_per_forward=passes_per_forward)
    video = noised_state(torch.zeros_like(c.video), c.video)
    audio = noised_state(torch.zeros_like(c.audio), c.audio)
    return _Step(setup, video, audio, ltx2_sigmas(steps, device=c.video.device))


def step(s: Settings) -> list[Row]:
    rows = []
    for version in s.versions:
        rows += _step_rows(s, suite_config(version, s.full_layers, s.quick))
        _free(s.device)
    return rows


@torch.no_grad()
def _step_rows(s: Settings, config: TransformerConfig) -> list[Row]:
    ours = random_transformer(config, s.device, s.dtype)
    c = clip(config, s.step_size, s.text_tokens, s.device, s.dtype)
    batched, one_by_one = _guided(ours, c, s.steps), _guided(ours, c, s.steps, passes_per_forward=1)
    sides = {"ours, passes batched": batched, "ours, one pass at a time": one_by_one}
    if config.version.value in REFERENCE_VERSIONS:
        ref_step, _ = reference_loop(reference_of(ours), c.text, c.negative, *default_guidance(
            config.version, config.num_layers), c.video_positions, c.audio_positions)
        ref_states = (reference_state(c.video.clone(), c.video_positions), reference_state(c.audio.clone(),
                                                                                          c.audio_positions))
        sides["reference loop"] = lambda: ref_step(*ref_states, batched.sigmas, 0)
    return [{"version": config.version.value, "size": "×".join(map(str, s.step_size[::-1])),
             "blocks": config.num_layers, "side": name, "passes": len(batched.setup.runner.passes),
             "ms": median_ms(fn, s.device, s.repeats, s.warmup), "peak_gib": peak_extra_bytes(fn, s.device) / 2**30}
            for name, fn in sides.items()]


@torch.no_grad()
def launch(s: Settings) -> list[Row]:
    config = suite_config(s.versions[0], s.full_layers, s.quick)
    ours = random_transformer(config, s.device, s.dtype)
    rows = []
    for size in s.launch_sizes:
        c = clip(config, size, s.text_tokens, s.device, s.dtype)
        guided = _guided(ours, c, s.steps)
        tv, ta, text = c.tokens
        passes = len(guided.setup.runner.passes)
        row = {"version": config.version.value, "size": "×".join(map(str, size[::-1])), "video_tokens": tv,
               "blocks": config.num_layers, "passes": passes,
               "flop_ms": step_flop_ms(config, (tv, ta, text), passes),
               "eager_ms": median_ms(guided, s.device, s.repeats, s.warmup), "cuda_graph_ms": None}
        if s.device.type == "cuda":
            captured = CudaGraphStep()
            row["cuda_graph_ms"] = median_ms(lambda: captured(guided.setup, guided.video, guided.audio,
                                                              guided.sigmas[0], guided.sigmas[1]),
                                             s.device, s.repeats, s.warmup)
        with _compiled(ours, s.compile_backend):
            row["compile_ms"] = median_ms(guided, s.device, s.repeats, s.warmup)
        rows.append(row)
    return rows


@contextlib.contextmanager
def _compiled(model: LTX2Transformer, backend: str) -> Iterator[None]:
    """Per-block compile for the duration (what `--compile` does), then the eager blocks back."""
    torch._dynamo.reset()
    compile_blocks(model, backend=backend)
    try:
        yield
    finally:
        for block in model.transformer_blocks:
            block._compiled_call_impl = None  # undoes nn.Module.compile
        torch._dynamo.reset()


def syncs(s: Settings) -> list[Row]:
    demo = suite_config(s.versions[0], 3, quick=True)
    slice_ = suite_config(s.versions[0], s.slice_layers, s.quick)
    rows = [_sync_row(s, "demo", demo, (17, 64, 96)), _sync_row(s, "full-width slice", slice_, s.step_size)]
    _free(s.device)
    return rows


@torch.no_grad()
def _sync_row(s: Settings, name: str, config: TransformerConfig, size: tuple[int, int, int]) -> Row:
    """Host syncs of a whole denoising stage after its set-up (passes, states, sigmas) and one warm-up stage."""
    guided = _guided(random_transformer(config, s.device, s.dtype),
                     clip(config, size, s.text_tokens, s.device, s.dtype), s.steps)

    def run():
        return denoise(guided.setup, guided.video, guided.audio, guided.sigmas)

    run()
    synchronize(s.device)
    counted = _cuda_syncs(run, s.steps) if s.device.type == "cuda" else _census_syncs(run, s.steps)
    return {"model": name, "blocks": config.num_layers, "size": "×".join(map(str, size[::-1])), "steps": s.steps,
            **counted}


def _census_syncs(run, steps: int) -> Row:
    with OpCensus() as census:
        run()
    return {"sync_debug_error": None, "syncs_per_step": sum(census.syncs().values()) / steps,
            "d2h_copies_per_step": None, "h2d_copies_per_step": census.transfers() / steps}


def _cuda_syncs(run, steps: int) -> Row:
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.cuda.set_sync_debug_mode("error")
    try:
        run()
        error = None
    except RuntimeError as exc:
        error = str(exc).splitlines()[0]
    finally:
        torch.cuda.set_sync_debug_mode(0)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function("suite.stage"):
            run()
    events = prof.events()
    stage = next(e for e in events if e.name == "suite.stage").time_range
    inside = [e for e in events if stage.start <= e.time_range.start and e.time_range.end <= stage.end]
    return {"sync_debug_error": error,
            "syncs_per_step": sum(e.name in SYNC_EVENTS for e in inside) / steps,
            # copies are device activities, timed on the GPU's clock: counted over the whole (one-stage) profile
            "d2h_copies_per_step": sum("DtoH" in e.name for e in events) / steps,
            "h2d_copies_per_step": sum("HtoD" in e.name for e in events) / steps}


@torch.no_grad()
def recompiles(s: Settings) -> list[Row]:
    from torch._dynamo.utils import counters

    config = suite_config(s.versions[0], s.slice_layers, s.quick)
    model = random_transformer(config, s.device, s.dtype)
    c = clip(config, s.launch_sizes[0], s.text_tokens, s.device, s.dtype)
    release = default_guidance(config.version, config.num_layers)
    other = tuple(replace(g, cfg=g.cfg + 1.5, stg=g.stg + 0.5, rescale=g.rescale / 2, modality=g.modality + 1.0)
                  for g in release)
    with _compiled(model, s.compile_backend):
        counters.clear()
        _guided(model, c, s.steps, release)()
        graphs = counters["stats"]["unique_graphs"]
        recompiled = sum(counters["recompiles"].values())
        for guidance in (other, release):
            _guided(model, c, s.steps, guidance)()
        return [{"blocks": config.num_layers, "graphs_first_run": graphs,
                 "graphs_after_new_scales": counters["stats"]["unique_graphs"],
                 "recompiles_first_run": recompiled,
                 "recompiles_after_new_scales": sum(counters["recompiles"].values()) - recompiled}]


MEMORY_CAPS_GB = (24, 32)


@torch.no_grad()
def memory(s: Settings) -> list[Row]:
    """One guided step (4 passes) of the full-depth model at the step size per weight mode (bf16, fp8 block linears)
    with the device memory capped at 24 and 32 GB (`set_per_process_memory_fraction`): the memory plan decides what
    stays resident and streams the rest. Quick mode: the tiny model on the CPU with budgets of all blocks and of
    none resident."""
    rows = []
    for version in s.versions:
        config = suite_config(version, s.full_layers, s.quick)
        for fp8 in (False, True):
            # random weights drawn (and quantised) on the device, then kept on the host for each row's plan: drawing
            # 38 GB on the CPU took more than the 10 minutes of a lent GPU's call (2026-11-24)
            source = random_transformer(config, s.device, s.dtype)
            if fp8:
                quantize_blocks(source)
            source = source.to("cpu")
            _free(s.device)
            weights = transformer_weight_bytes(config, s.dtype, fp8=fp8)
            for cap in _caps(s, config, weights):
                rows.append(_memory_row(s, config, source, weights, fp8, cap))
                _free(s.device)
            del source
    return rows


def _caps(s: Settings, config: TransformerConfig, weights) -> list[int]:
    if not s.quick:
        return [gb * 10**9 for gb in MEMORY_CAPS_GB]
    activations = activation_bytes(config, *s.step_size, 4, s.dtype)
    return [int((weights.total + activations) / HEADROOM) + 1,  # every block resident, then none
            int((weights.non_block + 2 * weights.per_block + activations) / HEADROOM) + 1]


def _memory_row(s: Settings, config: TransformerConfig, source: LTX2Transformer, weights, fp8: bool, cap: int) -> Row:
    row = {"version": config.version.value, "weights": "fp8" if fp8 else "bf16", "cap_gb": cap / 1e9}
    gpu = torch.device("cuda", torch.cuda.current_device()) if s.device.type == "cuda" else None  # an index
    if gpu is not None:
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap / torch.cuda.get_device_properties(gpu)
                                                       .total_memory), gpu)
    try:
        plan = plan_memory(config, weights, cap, *s.step_size, 4, dtype=s.dtype, fp8_available=not fp8)
    except MemoryPlanError as exc:
        if gpu is not None:
            torch.cuda.set_per_process_memory_fraction(1.0, gpu)
        return row | {"plan": f"refused: {exc}"}
    model = copy.deepcopy(source)
    apply_memory_plan(model, plan, s.device)
    c = clip(config, s.step_size, s.text_tokens, s.device, s.dtype)
    step = _guided(model, c, s.steps, passes_per_forward=plan.passes_per_forward)
    row |= {"resident": f"{plan.resident_blocks}/{config.num_layers}", "planned_peak_gb": plan.peak / 1e9,
            "ms": median_ms(step, s.device, s.repeats, s.warmup),
            "peak_gib": peak_extra_bytes(step, s.device) / 2**30}
    if gpu is not None:  # the whole device peak of that step (weights included), against the plan's
        row["device_peak_gb"] = torch.cuda.max_memory_allocated(gpu) / 1e9
    del model, step
    if gpu is not None:
        torch.cuda.set_per_process_memory_fraction(1.0, gpu)
    print("memory row:", row, flush=True)  # the full-depth rows are slow to set up: each shows as soon as it is taken
    return row


def _free(device: torch.device) -> None:
    """Frees what the last row left: a streamed model and its streamer's hooks refer to each other, so only the
    cycle collector frees them (without it the next 32 GB row found the 24 GB row's blocks still on the device)."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


SECTIONS = {"forward": forward, "step": step, "launch": launch, "syncs": syncs, "recompiles": recompiles,
            "memory": memory}
