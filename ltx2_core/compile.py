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
    them at fixed addresses); call it with other ones and it refuses. Use a new CudaGraphStep per run.
    """

    def __init__(self, warmup: int = 2) -> None:
        self.warmup = warmup
        self.graph: torch.cuda.CUDAGraph | None = None

    def __call__(self, setup: StepSetup, video: StreamState, audio: StreamState, sigma: torch.Tensor,
                 sigma_next: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.graph is None:
            self._capture(setup, video, audio, sigma, sigma_next)
        self._check_bound(setup, video, audio)
        for static, value in zip(self.inputs, (video.latent, audio.latent, sigma, sigma_next)):
            static.copy_(value)
        self.graph.replay()
        return self.outputs[0].clone(), self.outputs[1].clone()  # the next replay overwrites the outputs

    def _capture(self, setup: StepSetup, video: StreamState, audio: StreamState, sigma: torch.Tensor,
                 sigma_next: torch.Tensor) -> None:
        if not video.latent.is_cuda:
            raise RuntimeError("CUDA graph capture needs the model and latents on a CUDA device; run without "
                               "cuda_graphs on the CPU")
        self.setup, self.bound = setup, (video.clean, video.mask, audio.clean, audio.mask)
        self.inputs = [t.clone() for t in (video.latent, audio.latent, sigma, sigma_next)]
        static_video, static_audio = video._replace(latent=self.inputs[0]), audio._replace(latent=self.inputs[1])
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

    def _check_bound(self, setup: StepSetup, video: StreamState, audio: StreamState) -> None:
        current = (video.clean, video.mask, audio.clean, audio.mask)
        if setup is not self.setup or any(a is not b for a, b in zip(current, self.bound)):
            raise ValueError("this captured step belongs to another run (setup or masks differ); make a new "
                             "CudaGraphStep for each run")
