"""How many guidance passes one transformer forward batches by default, chosen from measurement per device.

Batching the passes of a step (cond, uncond, perturbed, isolated) into one forward pays where a forward is bound by
kernel launches and host work (small token counts: every GEMM is too small to fill the GPU, so 4 passes cost little
more than 1); where the GEMMs already fill the device it does not, and one pass at a time also keeps a quarter of
the activations (≈1.5 GiB less at 6,144 video tokens on LTX-2.x). The table below holds, per CUDA compute
capability, the video-token count from which one pass per forward is at least as fast as batching; a device not in
it keeps every pass in one forward (what it did before any measurement). The GPU suite's `stage1` section
(`bench/suite_stage1.py`) measures both at 1,536 and 6,144 tokens and reports the row to put here.

Measured (docs/performance.md): H100, bf16, 6,144 tokens, guided step: 1.58 s batched vs 1.54 s one pass at a time.
At 1,536 tokens a step is launch-bound (≈245 ms host overhead per eager step), where batching is expected to win;
until the stage1 section measures it, the H100/H200 crossover is set between the two sizes (3,072 tokens).
"""

from __future__ import annotations

import torch

# (major, minor) CUDA capability -> video tokens from which one pass per forward is used; from bench/suite_stage1.py
CROSSOVER_TOKENS: dict[tuple[int, int], int] = {
    (9, 0): 3072,  # H100 / H200: one at a time wins at 6,144 (measured), batched at 1,536 (pending the suite)
}


def policy_passes(capability: tuple[int, int] | None, video_tokens: int, passes: int,
                  table: dict[tuple[int, int], int] | None = None) -> int:
    """Guidance passes per forward for a step of `passes` at `video_tokens` (0: audio only) on a device of CUDA
    `capability` (None: not a CUDA device): 1 at or above the device's crossover in `table` (default
    CROSSOVER_TOKENS), else all `passes` in one forward. The memory plan may lower it further to fit."""
    if passes < 1:
        raise ValueError(f"passes must be at least 1, got {passes}")
    return 1 if _one_at_a_time(capability, video_tokens, table) else passes


def policy_cap(capability: tuple[int, int] | None, video_tokens: int,
               table: dict[tuple[int, int], int] | None = None) -> int | None:
    """`policy_passes` as the sampler's `passes_per_forward`: None (every pass in one forward) or 1."""
    return 1 if _one_at_a_time(capability, video_tokens, table) else None


def _one_at_a_time(capability: tuple[int, int] | None, video_tokens: int,
                   table: dict[tuple[int, int], int] | None) -> bool:
    crossover = (CROSSOVER_TOKENS if table is None else table).get(capability) if capability is not None else None
    return crossover is not None and video_tokens >= crossover


def device_capability(device: torch.device | str) -> tuple[int, int] | None:
    """The CUDA compute capability of `device`, None for any other device (or none visible)."""
    device = torch.device(device)
    return torch.cuda.get_device_capability(device) if device.type == "cuda" and torch.cuda.is_available() else None
