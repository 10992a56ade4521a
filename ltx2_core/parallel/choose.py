"""The layout of a run picked by the cost model where the user leaves it to the pack ("auto"), and the predicted
end-to-end time of every layout the layout widget offers.

`fastest_layout` keeps `default_layout`'s memory rule (tensor parallel only as far as the weights need to fit) and
then takes the layout the cost model predicts fastest for the run; GPUs the model has no figures for (not an H100,
H200 or B200) keep `default_layout`'s rule-based choice.
"""

from __future__ import annotations

from ltx2_core.parallel.config import HEADROOM, ParallelConfig, default_layout, stage_layout
from ltx2_core.parallel.cost_model import (Setting, Workload, layouts, released_config, second_layout, single,
                                           two_stage)
from ltx2_core.parallel.hardware import GPUS, LINKS, Gpu
from ltx2_core.releases import RELEASED_HEADS

DEFAULT_RUN = (768, 512, 121)  # the release's two-stage size: the run the widget's times are for


def gpu_kind(name: str) -> Gpu | None:
    """The cost model's GPU for a device name as torch reports it ("NVIDIA H100 80GB HBM3"), or None."""
    upper = name.upper()
    return next((gpu for key, gpu in GPUS.items() if key in upper), None)


def link_for(names: list[str]) -> str:
    """The link between a machine's GPUs as the model assumes it: NVLink on SXM boards of the H100 / H200 / B200,
    PCIe 5 for their PCIe cards (H100 PCIe, H200 NVL), PCIe 4 for everything else."""
    kinds = [gpu_kind(n) for n in names]
    if not names or None in kinds:
        return "pcie4"
    if any("PCIE" in n.upper() or "NVL" in n.upper() for n in names):
        return "pcie5"
    return kinds[0].intra_link


def regroups(layout: ParallelConfig, device_names: list[str], hosts: int = 1, version: str = "2.3") -> bool:
    """Whether the loaded cfg `layout` regroups its cfg and sp ranks for a stage of one pass (`stage_regroup`):
    the cost model's call for the release's two-stage run on GPUs it knows (their link: `link_for`, 100 Gb Ethernet
    between `hosts` machines); yes on GPUs it does not know and on CPU ranks (no names), where each rank's work
    halves and the ranks share a machine."""
    if stage_layout(layout, 1, RELEASED_HEADS) == layout:
        return False
    gpu = gpu_kind(device_names[0]) if device_names else None
    if gpu is None:
        return True
    setting = Setting(gpu=gpu, link=LINKS["eth100" if hosts > 1 else link_for(device_names)])
    return second_layout(two_stage(*DEFAULT_RUN, passes=4), layout, released_config(version), setting) != layout


def fit_tp(devices: int, weight_bytes: float, free_bytes: float, heads: tuple[int, ...] = RELEASED_HEADS) -> int:
    """The smallest tensor-parallel degree whose weight share fits HEADROOM of a device (default_layout's rule)."""
    tp = 1
    while weight_bytes / tp > HEADROOM * free_bytes and devices % (tp * 2) == 0 \
            and all(count % (tp * 2) == 0 for count in heads):
        tp *= 2
    return tp


def fastest_layout(devices: int, passes: int, weight_bytes: float, free_bytes: float, device_names: list[str],
                   version: str = "2.3", workload: Workload | None = None) -> ParallelConfig:
    """The layout of `devices` GPUs the cost model predicts fastest for `workload` (default: the two-stage
    768×512×121 run with `passes` guidance passes), among those whose weights fit; `default_layout` where the
    GPUs are not ones the model knows."""
    gpu = gpu_kind(device_names[0]) if device_names else None
    if gpu is None:
        return default_layout(devices, passes, int(weight_bytes), int(free_bytes))
    tp = fit_tp(devices, weight_bytes, free_bytes)
    workload = workload or two_stage(*DEFAULT_RUN, passes=passes)
    setting = Setting(gpu=gpu, link=LINKS[link_for(device_names)])
    config = released_config(version)
    options = [c for c in layouts(devices, passes) if c.tp >= tp]
    if not options:
        return default_layout(devices, passes, int(weight_bytes), int(free_bytes))
    return min(options, key=lambda c: (round(single(workload, c, config, setting).seconds, 2), c.tp, -c.cfg))


def predicted_times(max_devices: int, device_names: list[str], version: str = "2.3",
                    gpu_fallback: str = "H100") -> dict:
    """Seconds of the default two-stage run for every layout of 1..`max_devices` GPUs and 1..4 guidance passes,
    keyed "cfg,sp,tp,passes", for the layout widget; the GPU and link assumed are named (with no known GPU the
    figures are `gpu_fallback`'s over PCIe 4, and "assumed" is true)."""
    known = gpu_kind(device_names[0]) if device_names else None
    gpu = known or GPUS[gpu_fallback]
    link = link_for(device_names) if known else "pcie4"
    setting = Setting(gpu=gpu, link=LINKS[link])
    config = released_config(version)
    times = {}
    for passes in range(1, 5):
        workload = two_stage(*DEFAULT_RUN, passes=passes)
        for devices in range(1, max_devices + 1):
            for c in layouts(devices, passes):
                key = f"{c.cfg},{c.sp},{c.tp},{passes}"
                times[key] = round(single(workload, c, config, setting).seconds, 2)
    return {"gpu": gpu.name, "assumed": known is None, "link": link,
            "run": "two-stage {}×{}×{}".format(*DEFAULT_RUN), "version": version,
            "seconds": times}
