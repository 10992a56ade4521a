"""The devices a layout can use: names and total / free memory (read-only; what the parallelism widget shows)."""

from __future__ import annotations

import torch


def visible_devices() -> list[dict[str, object]]:
    """One entry per visible CUDA device: name, total and free bytes ([] without CUDA)."""
    devices = []
    for index in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):
        free, total = torch.cuda.mem_get_info(index)
        devices.append({"index": index, "name": torch.cuda.get_device_name(index), "total": total, "free": free})
    return devices
