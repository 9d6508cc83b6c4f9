"""How many bytes the KV cache may use on a device."""

from __future__ import annotations

import psutil
import torch


def available_memory_bytes(device: torch.device | str) -> int:
    """Bytes currently free on ``device``.

    NOTE: on CUDA this is the driver's free memory (``torch.cuda.mem_get_info``), so call it
    after the weights are loaded: the KV cache gets what is left. On CPU it is the host's
    available memory as psutil reports it (free + reclaimable page cache).
    """
    dev = torch.device(device)
    if dev.type == "cuda":
        free, _total = torch.cuda.mem_get_info(dev)
        return int(free)
    if dev.type == "cpu":
        return int(psutil.virtual_memory().available)
    raise ValueError(f"unsupported device type for memory sizing: {dev.type}")


def memory_budget_bytes(device: torch.device | str, memory_fraction: float) -> int:
    """``memory_fraction`` of the memory currently free on ``device``, in bytes."""
    if not 0.0 < memory_fraction <= 1.0:
        raise ValueError(f"memory_fraction must be in (0, 1], got {memory_fraction}")
    return int(available_memory_bytes(device) * memory_fraction)
