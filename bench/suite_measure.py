"""How the GPU suite measures: device-timed medians, peak memory, host syncs, and the FLOP count of a forward.

Times on CUDA come from CUDA events around each run (the host clock around unsynchronised work measures the
launches, not the work); on the CPU from the host clock. Every figure is the median of `repeats` runs after
`warmup` untimed ones.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from ltx2_core.model.transformer.config import TransformerConfig

PEAK_TFLOPS = 800.0  # a large bf16 matmul on an H100 / H200 (shared/docs/performance.md)


def median_ms(fn: Callable[[], object], device: torch.device, repeats: int, warmup: int = 2) -> float:
    """Median wall time of `fn` on `device` in milliseconds."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            start_s = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start_s) * 1000)
    return statistics.median(times)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_extra_bytes(fn: Callable[[], object], device: torch.device) -> int:
    """Peak memory `fn` needs above what is allocated before it: CUDA's allocator peak on a GPU, the peak of
    simultaneously live tensor storages on the CPU."""
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        fn()
        synchronize(device)
        return torch.cuda.max_memory_allocated(device) - base
    from memory import LiveTensorMemory

    with LiveTensorMemory() as live:
        fn()
    return live.peak


def forward_flops(config: TransformerConfig, video_tokens: int, audio_tokens: int, text_tokens: int,
                  batch: int = 1, *, text_kv: bool = True) -> float:
    """FLOPs of one forward (shared/docs/performance.md): the linear layers of both streams, the text K/V
    projections, and the attention matmuls (QKᵀ and PV) of every block; AdaLN, gates and the in/out projections
    are below 0.1% at the released sizes and left out. `text_kv` False: without the text K/V projections (4.1
    TFLOP at the released widths), which a run of LTX-2.0 or 2.5 computes once, outside the forward it times
    (`TransformerConfig.static_text_kv`; `in_forward_text_kv`)."""
    d = config.video.heads * config.video.head_dim
    da = config.audio.heads * config.audio.head_dim
    tv, ta, c = video_tokens, audio_tokens, text_tokens
    # per token: self-attention QKVO, text attention Q and O, the a2v / v2a projections, the 4x feed-forward
    linear = tv * (14 * d * d + 4 * d * da) + ta * 18 * da * da
    kv = c * (2 * config.video.context_dim * d + 2 * config.audio.context_dim * da) if text_kv else 0
    attention = 2 * (tv * tv * d + tv * c * d + 2 * tv * ta * da + ta * ta * da + ta * c * da)
    return 2.0 * batch * config.num_layers * (linear + kv + attention)


def in_forward_text_kv(config: TransformerConfig) -> bool:
    """Whether our forward computes the text K/V itself: only where they follow sigma (2.3); 2.0's and 2.5's are
    computed once per run by `prepare_run` (its default `cache_text_kv`), so a timed forward does not count them."""
    return not config.static_text_kv


def step_flop_ms(config: TransformerConfig, tokens: tuple[int, int, int], passes: int) -> float:
    """The time of a guided step's forwards (`passes` passes at (video, audio, text) `tokens`) at PEAK_TFLOPS, ms;
    the text K/V computed once per run (2.0, 2.5) left out, as from the timed step."""
    return forward_flops(config, *tokens, passes, text_kv=in_forward_text_kv(config)) / (PEAK_TFLOPS * 1e12) * 1e3


def tflops(flops: float, ms: float) -> float:
    return flops / (ms * 1e-3) / 1e12
