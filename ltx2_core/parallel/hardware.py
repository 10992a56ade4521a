"""The facts the layout cost model (`cost_model.py`) is fed: links between GPUs, GPUs, and measured forward times.

Every number names its source. Link figures are the vendors' nominal per-direction rates times NCCL's typical bus
efficiency (`LINK_EFFICIENCY`); latencies are per exchange step (hop) of a ring, the order NCCL's low-latency
protocol reaches: a small all-reduce over 8 NVLink GPUs (14 hops) in ≈ 10–20 µs (nccl-tests), more over PCIe and
between machines. They are assumptions, not measurements: no multi-GPU machine was lent. Forward times are
the GPU suite's (bench/gpu_suite.py `forward` section: one pass, batch 1, the 8-block slice of the released
structure at full widths), as docs/performance.md publishes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

GB = 1e9
LINK_EFFICIENCY = 0.8  # NCCL bus bandwidth ≈ 80 % of the nominal link rate on large messages (nccl-tests busbw)


@dataclass(frozen=True)
class Link:
    """One kind of connection between two ranks: per-direction bytes/s each GPU can send, and seconds of latency
    per collective step (a ring or pairwise exchange takes n−1 of them)."""

    name: str
    bandwidth: float  # effective bytes per second per direction per GPU
    latency: float  # seconds per collective step
    source: str


def _link(name: str, nominal_gb_s: float, latency_us: float, source: str) -> Link:
    return Link(name, nominal_gb_s * GB * LINK_EFFICIENCY, latency_us * 1e-6, source)


LINKS: Mapping[str, Link] = MappingProxyType({link.name: link for link in (
    _link("nvlink4", 450, 1.5, "NVLink 4 (H100/H200 SXM): 900 GB/s both ways per GPU through NVSwitch (NVIDIA H100 "
          "datasheet)"),
    _link("nvlink5", 900, 1.5, "NVLink 5 (B200 HGX): 1.8 TB/s both ways per GPU (NVIDIA B200 datasheet)"),
    _link("pcie4", 32, 5, "PCIe 4.0 x16: 32 GB/s per direction (PCI-SIG 4.0, 16 GT/s × 16 lanes, 128b/130b)"),
    _link("pcie5", 64, 5, "PCIe 5.0 x16: 64 GB/s per direction (PCI-SIG 5.0, 32 GT/s × 16 lanes)"),
    _link("eth100", 12.5, 20, "100 Gb Ethernet between machines (RoCE): 12.5 GB/s per direction"),
    _link("eth400", 50, 10, "400 Gb Ethernet / NDR InfiniBand between machines: 50 GB/s per direction"),
)})


@dataclass(frozen=True)
class Gpu:
    """One GPU kind: how fast it computes relative to the GPU its forward times were measured on, the links its
    machines usually have, and its memory."""

    name: str
    compute_scale: float  # measured-device seconds of compute × this = this GPU's seconds (1.0 where measured)
    measured_on: str  # the GPU whose forward times feed this one (itself where it was measured)
    intra_link: str  # between GPUs of one machine (SXM boards)
    memory_bytes: float
    source: str


GPUS: Mapping[str, Gpu] = MappingProxyType({gpu.name: gpu for gpu in (
    Gpu("H100", 1.0, "H100", "nvlink4", 80 * GB,
        "measured (bench/results/issue38, 2026-11-28; LTX-2.0: the GPU suite's, 2026-11-24)"),
    Gpu("H200", 1.0, "H200", "nvlink4", 141 * GB, "measured (bench/results/issue38, 2026-11-28)"),
    Gpu("B200", 989 / 2250, "H200", "nvlink5", 180 * GB,
        "not measured: the H200's times with the device part scaled by the dense bf16 peaks, 989 TFLOP/s against "
        "2.25 PFLOP/s (NVIDIA datasheets); the host-bound floor (launches) is kept"),
)})


@dataclass(frozen=True)
class ForwardTimes:
    """Measured milliseconds of one forward pass (batch 1) of `blocks` blocks at some video-token counts, and where
    measured, of the whole `full_blocks`-block model: the two depths split a forward into a per-block time and a
    fixed per-forward one (host work outside the blocks, which hides under the device's work at large sizes)."""

    version: str
    gpu: str
    blocks: int
    ms: Mapping[int, float]  # video tokens -> ms of one forward of `blocks` blocks
    source: str
    full_blocks: int = 48
    full_ms: Mapping[int, float] = field(default_factory=dict)  # video tokens -> ms of the `full_blocks`-block forward

    def points(self) -> list[tuple[int, float, float]]:
        """(video tokens, seconds per block, fixed seconds per forward), by token count; without the whole model's
        time the fixed part is 0 and the slice's time is all per block."""
        found = []
        for tokens, ms in sorted(self.ms.items()):
            full = self.full_ms.get(tokens)
            per_block = ms / self.blocks if full is None else (full - ms) / (self.full_blocks - self.blocks)
            found.append((tokens, per_block / 1000, max(0.0, ms - self.blocks * per_block) / 1000))
        return found


_SUITE_H100 = "docs/performance.md, GPU suite `forward` on an H100 80GB HBM3, bf16, torch 2.11, 2026-11-24"
_SCALE = ("bench/results/issue38/{}_forward_{{8,48}}blocks.json: bench/scale_forward.py's measurement on an {}, "
          "bf16, torch 2.11+cu130, 2026-11-28, the code of b12e536")
_SCALE_H100, _SCALE_H200 = _SCALE.format("h100", "H100 80GB HBM3"), _SCALE.format("h200", "H200 (143 GB)")


def _times(*pairs: tuple[int, float]) -> Mapping[int, float]:
    return MappingProxyType(dict(pairs))


MEASURED: Mapping[tuple[str, str], ForwardTimes] = MappingProxyType({
    ("2.0", "H100"): ForwardTimes("2.0", "H100", 8, _times((1536, 28.4), (6144, 67.4), (15360, 195.0)),
                                  _SUITE_H100 + " (first loan)"),
    ("2.3", "H100"): ForwardTimes("2.3", "H100", 8,
                                  _times((1536, 57.76), (3840, 59.6), (6144, 74.6), (15360, 201.5)), _SCALE_H100,
                                  full_ms=_times((1536, 300.41), (3840, 282.8), (6144, 443.46), (15360, 1215.92))),
    ("2.5", "H100"): ForwardTimes("2.5", "H100", 8,
                                  _times((1536, 52.31), (3840, 46.91), (6144, 72.82), (15360, 201.69)), _SCALE_H100),
    ("2.3", "H200"): ForwardTimes("2.3", "H200", 8,
                                  _times((1536, 45.87), (3840, 57.22), (6144, 71.62), (15360, 199.61)), _SCALE_H200,
                                  full_ms=_times((1536, 209.1), (3840, 274.21), (6144, 440.05), (15360, 1212.6))),
    ("2.5", "H200"): ForwardTimes("2.5", "H200", 8,
                                  _times((1536, 53.15), (3840, 54.2), (6144, 71.63), (15360, 204.48)), _SCALE_H200),
})

# whole 48-block guided steps (4 passes, one per forward) measured on the H100 (GPU suite `step`, 2026-11-24,
# docs/performance.md): not fed to the model, a check of its H100 figures (taken two days later on newer code)
MEASURED_STEPS_MS: Mapping[str, tuple[int, float]] = MappingProxyType({
    "2.0": (6144, 1540.0), "2.3": (6144, 1680.0), "2.5": (6144, 1620.0)})

# one-GPU times of the parts around the transformer (seconds), at 768×512×121 and the larger sizes where measured
DECODE_S: Mapping[str, Mapping[int, float]] = MappingProxyType({  # output pixels per frame -> seconds (tiled)
    "conv": MappingProxyType({768 * 512: 0.53, 1536 * 1024: 2.25}),
    "diffusion": MappingProxyType({768 * 512: 1.54, 1536 * 1024: 7.43}),
})
DECODE_SOURCE = "docs/performance.md, bench/decoders25.py on an H100 (2026-11-24), tiled decodes, 121 frames"
