"""Optional speed-ups for CUDA: per-block `torch.compile` and whole-step CUDA graph capture (off on the CPU).

Both rely on the step being sync-free with static shapes (see `sampling.denoise`): every block of the DiT has the
same code, so one compiled graph serves all 48 blocks; the guidance scales are tensors, so new scales reuse it. A
captured step replays every kernel of a denoising step (all guidance passes, the guidance, the Euler update) with
one launch; only the latents and the two sigmas are copied into its input buffers, device to device.
"""

from __future__ import annotations

from typing import Any

import torch

from ltx2_core.model.transformer import LTX2Transformer
from ltx2_core.sampling.denoise import StepSetup, guided_step
from ltx2_core.sampling.steps import StreamState


def compile_blocks(model: LTX2Transformer, **options: Any) -> LTX2Transformer:
    """Compiles every transformer block in place (`nn.Module.compile`), e.g. `compile_blocks(model, mode="max-autotune-
    no-cudagraphs")`; `options` go to torch.compile. Returns the model."""
    for block in model.transformer_blocks:
        block.compile(**options)
    return model


class CudaGraphStep:
    """`guided_step` captured as a CUDA graph on its first call, replayed on every later one.

    A captured step is bound to the setup and the denoise masks / clean latents of its first call (the graph reads
    them at fixed addresses); call it with other ones and it refuses. Use a new CudaGraphStep per run. An audio-only
    run (video None) captures the audio step alone.
    """

    captured = True  # replays run no Python between blocks: a run's should_stop is read between steps only

    def __init__(self, warmup: int = 2) -> None:
        self.warmup = warmup
        self.graph: torch.cuda.CUDAGraph | None = None

    def __call__(self, setup: StepSetup, video: StreamState | None, audio: StreamState, sigma: torch.Tensor,
                 sigma_next: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
        if self.graph is None:
            self._capture(setup, video, audio, sigma, sigma_next)
        self._check_bound(setup, video, audio)
        for static, value in zip(self.inputs, (_latent(video), audio.latent, sigma, sigma_next)):
            if static is not None:
                static.copy_(value)
        self.graph.replay()
        # the next replay overwrites the outputs
        return tuple(None if out is None else out.clone() for out in self.outputs)

    def _capture(self, setup: StepSetup, video: StreamState | None, audio: StreamState, sigma: torch.Tensor,
                 sigma_next: torch.Tensor) -> None:
        if not audio.latent.is_cuda:
            raise RuntimeError("CUDA graph capture needs the model and latents on a CUDA device; run without "
                               "cuda_graphs on the CPU")
        self.setup, self.bound = setup, _bound(video, audio)
        self.inputs = [None if t is None else t.clone() for t in (_latent(video), audio.latent, sigma, sigma_next)]
        static_video = None if video is None else video._replace(latent=self.inputs[0])
        static_audio = audio._replace(latent=self.inputs[1])
        args = (setup, static_video, static_audio, self.inputs[2], self.inputs[3])
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the capture stream: allocator pools, cuBLAS handles, autotuning
            for _ in range(self.warmup):
                guided_step(*args)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.outputs = guided_step(*args)

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
    return (*video_bound, audio.clean, audio.mask)
