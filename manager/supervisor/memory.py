"""Free memory where the next engine may run: each GPU NVML sees, else the host's RAM.

NOTE: an engine runs on a GPU wherever NVML sees one (the docker runtime passes GPUs then, and
the process runtime's engine picks CUDA), so GPUs and the host are never mixed as places.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import psutil

from manager.readiness.gpu import GpuProbe, NvmlProbe
from manager.readiness.memory import GIB


@dataclass(frozen=True)
class DeviceMemory:
    gpu: int | None  # the NVML index; None: the host's RAM
    name: str  # as an operator reads it: "GPU 0 (NVIDIA H200)", "the host"
    total_bytes: int
    free_bytes: int


class MemoryProbe(ABC):
    @abstractmethod
    def devices(self) -> tuple[DeviceMemory, ...]:
        """Where the next engine may be placed, as measured now (a blocking call)."""


class SystemMemory(MemoryProbe):
    """GPUs through readiness' NVML probe; host RAM through psutil, at most `host_limit`."""

    def __init__(self, gpus: GpuProbe | None = None, host_limit: int | None = None) -> None:
        self._gpus = gpus or NvmlProbe()
        self._host_limit = host_limit

    def devices(self) -> tuple[DeviceMemory, ...]:
        snapshot = self._gpus.snapshot()
        if snapshot.gpus:
            return tuple(
                DeviceMemory(g.index, f"GPU {g.index} ({g.name})", g.total_bytes, g.free_bytes)
                for g in snapshot.gpus
            )
        memory = psutil.virtual_memory()
        if self._host_limit is None:
            return (DeviceMemory(None, "the host", memory.total, memory.available),)
        limit = min(self._host_limit, memory.total)
        name = f"the host (GOMGR_HOST_MEMORY_LIMIT={limit / GIB:.2f}GiB)"
        return (DeviceMemory(None, name, limit, min(memory.available, limit)),)
