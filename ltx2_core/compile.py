"""Optional speed-ups for CUDA: per-block `torch.compile` and whole-step CUDA graph capture (off on the CPU).

Both rely on the step being sync-free with static shapes (see `sampling.denoise`): every block of the DiT has the
same code, so one compiled graph serves all 48 blocks; the guidance scales are tensors, so new scales reuse it. A
captured step replays every kernel of a denoising step (all guidance passes, the guidance, the Euler update) with
one launch; only the latents, the two sigmas and (ancestral steps) the step's fresh noise are copied into its input
buffers, device to device.

CUDA graphs are on by default ("auto", `graphs_problem`) where the step is capturable: a CUDA device, every
transformer block resident (no streamed or offloaded block, whose weights a forward copies in from the host) and
one GPU (CFG-parallel runners exchange predictions between processes). Elsewhere "auto" runs the step eagerly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

import torch

from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.sampling.denoise import Step, StepSetup, guided_step
from ltx2_core.sampling.steps import StreamState

GraphSetting = bool | Literal["auto", "on", "off"]
GRAPH_CHOICES = ("auto", "on", "off")


def graph_setting(value: GraphSetting) -> bool | Literal["auto"]:
    """`cuda_graphs` as True, False or "auto" ("on" / "off" are True / False); a clear error for anything else."""
    if isinstance(value, bool) or value == "auto":
        return value
    if value in ("on", "off"):
        return value == "on"
    raise ValueError(f"cuda_graphs must be one of {', '.join(GRAPH_CHOICES)} (or True / False), got {value!r}")


def graphs_problem(model: LTX2Transformer, *, one_gpu: bool = True, device_type: str = "cuda") -> str | None:
    """Why a step of `model` cannot be captured as a CUDA graph, or None when it can: its weights must all be on one
    CUDA device (a streamed or offloaded block's weights are in host memory between its forwards and are copied in
    by hooks) and the run on one GPU. `device_type`: the type graphs capture on (tests pass "cpu", with
    `EagerReplay`)."""
    device = model.scale_shift_table.device
    if device.type != device_type:
        return "cuda_graphs needs the models on a CUDA device"
    if not one_gpu:
        return "cuda_graphs is not available with a multi-GPU layout"
    tensors = [*model.parameters(), *model.buffers()]
    if any(t.device != device for t in tensors) or any(m._forward_pre_hooks for m in model.modules()):
        return "cuda_graphs needs every block resident (some are streamed or offloaded)"
    return None


def use_graphs(setting: GraphSetting, model: LTX2Transformer, *, one_gpu: bool = True,
               device_type: str = "cuda") -> bool:
    """Whether to capture: "auto" where `graphs_problem` finds none (silently off elsewhere); True where it finds
    none (else ValueError naming the fix); False never."""
    setting = graph_setting(setting)
    if setting is False:
        return False
    problem = graphs_problem(model, one_gpu=one_gpu, device_type=device_type)
    if problem is not None and setting is True:
        raise ValueError(f"{problem}; set cuda_graphs to auto or off")
    return problem is None


def compile_blocks(model: LTX2Transformer, **options: Any) -> LTX2Transformer:
    """Compiles every transformer block in place (`nn.Module.compile`), e.g. `compile_blocks(model, mode="max-autotune-
    no-cudagraphs")`; `options` go to torch.compile. Returns the model."""
    for block in model.transformer_blocks:
        block.compile(**options)
    return model


class Graph(Protocol):
    def replay(self) -> None: ...


class GraphBackend(Protocol):
    """Captures a function: `capture(run, warmup)` -> (graph, outputs); each `graph.replay()` recomputes `run()`
    into the same outputs, reading the tensors `run` read at capture (their current values)."""

    def capture(self, run: Callable[[], tuple], warmup: int) -> tuple[Graph, tuple]: ...


class CudaBackend:
    """torch.cuda.CUDAGraph: warm-up runs on a side stream, then one captured run."""

    def capture(self, run: Callable[[], tuple], warmup: int) -> tuple[Graph, tuple]:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture stream: allocator pools, cuBLAS handles, autotuning
            for _ in range(warmup):
                run()
        torch.cuda.current_stream().wait_stream(side)
        # the warm-up's activations, cached by the allocator, go back to the device: the graph's own pool needs
        # that room (else a captured step would hold about twice an eager step's activations)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = run()
        return graph, outputs


class EagerReplay:
    """A stand-in for CUDA graphs on any device: capture runs the function once and keeps its outputs; a replay
    runs it again and copies the results into those outputs, as a graph writes them. So the bookkeeping of a
    captured step (static inputs, outputs at fixed addresses, what is drawn outside the graph) runs and is
    checked on the CPU. `replays` counts them."""

    class _Graph:
        def __init__(self, run: Callable[[], tuple], outputs: tuple) -> None:
            self.run, self.outputs, self.replays = run, outputs, 0

        def replay(self) -> None:
            self.replays += 1
            for out, new in zip(self.outputs, self.run()):
                if out is not None:
                    out.copy_(new)

    def capture(self, run: Callable[[], tuple], warmup: int) -> tuple[Graph, tuple]:
        outputs = run()
        return self._Graph(run, outputs), outputs


class CudaGraphStep:
    """A step (`guided_step`, or an `AncestralStep`) captured as a CUDA graph on its first call, replayed on every
    later one.

    A step with a `draw(video, audio)` (ancestral: its fresh noise) draws eagerly, from its own generator, before
    each replay (the same draws in the same order as the eager step), and the graph reads the draws from static
    input buffers (`advance`): the generator's state stays the host's, so a captured run and an eager one draw
    the same noise on any device, and the warm-up runs draw nothing.

    A captured step is bound to the setup and the denoise masks / clean latents of its first call (the graph reads
    them at fixed addresses); call it with other ones and it refuses. Use a new CudaGraphStep per run. An audio-only
    run (video None) captures the audio step alone. `backend`: how to capture (`CudaBackend`; `EagerReplay` runs the
    same bookkeeping on the CPU).
    """

    captured = True  # replays run no Python between blocks: a run's should_stop is read between steps only

    def __init__(self, step: Step = guided_step, warmup: int = 2, backend: GraphBackend | None = None) -> None:
        self.step, self.warmup, self.backend = step, warmup, backend or CudaBackend()
        self.graph: Graph | None = None

    def around(self, step: Step) -> CudaGraphStep:
        """A new captured step of `step` with this one's warm-up and backend (`stages.sample`'s ancestral steps)."""
        return CudaGraphStep(step, self.warmup, self.backend)

    def __call__(self, setup: StepSetup, video: StreamState | None, audio: StreamState, sigma: torch.Tensor,
                 sigma_next: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        draws = tuple(self.step.draw(video, audio)) if hasattr(self.step, "draw") else ()
        values = (_latent(video), _latent(audio), sigma, sigma_next, *draws)
        if self.graph is None:
            self._capture(setup, video, audio, values)
        self._check_bound(setup, video, audio)
        for static, value in zip(self.inputs, values):
            if static is not None:
                static.copy_(value)
        self.graph.replay()
        # the next replay overwrites the outputs
        return tuple(None if out is None else out.clone() for out in self.outputs)

    def _capture(self, setup: StepSetup, video: StreamState | None, audio: StreamState,
                 values: tuple[torch.Tensor | None, ...]) -> None:
        if isinstance(self.backend, CudaBackend) and not next(t for t in values if t is not None).is_cuda:
            raise RuntimeError("CUDA graph capture needs the model and latents on a CUDA device; run without "
                               "cuda_graphs on the CPU")
        self.setup, self.bound = setup, _bound(video, audio)
        self.inputs = [None if t is None else t.clone() for t in values]
        static_video = None if video is None else video._replace(latent=self.inputs[0])
        static_audio = None if audio is None else audio._replace(latent=self.inputs[1])
        args = (setup, static_video, static_audio, *self.inputs[2:4])
        if hasattr(self.step, "draw"):
            self.graph, self.outputs = self.backend.capture(lambda: self.step.advance(*args, *self.inputs[4:]),
                                                            self.warmup)
        else:
            self.graph, self.outputs = self.backend.capture(lambda: self.step(*args), self.warmup)

    def _check_bound(self, setup: StepSetup, video: StreamState | None, audio: StreamState) -> None:
        current = _bound(video, audio)
        if setup is not self.setup or any(a is not b for a, b in zip(current, self.bound)):
            raise ValueError("this captured step belongs to another run (setup or masks differ); make a new "
                             "CudaGraphStep for each run")


def _latent(state: StreamState | None) -> torch.Tensor | None:
    return None if state is None else state.latent


def _bound(video: StreamState | None, audio: StreamState) -> tuple[torch.Tensor | None, ...]:
    """What a captured step reads at fixed addresses besides its inputs: each stream's clean latent and mask."""
    video_bound = (None, None) if video is None else (video.clean, video.mask)
    return (*video_bound, *((None, None) if audio is None else (audio.clean, audio.mask)))
