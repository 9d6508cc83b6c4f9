"""Hardware readings for the panel: GPUs through readiness' NVML probe, host CPU and RAM."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import psutil

from manager.readiness.gpu import GpuInfo, GpuProbe, NvmlProbe


@dataclass(frozen=True)
class HostReading:
    cpu_percent: float
    cpu_count: int
    ram_used_bytes: int
    ram_total_bytes: int


@dataclass(frozen=True)
class HardwareReading:
    gpus: tuple[GpuInfo, ...]
    gpu_error: str | None  # NVML's reason when it gave no answer
    host: HostReading


class HardwareProbe(ABC):
    @abstractmethod
    def read(self) -> HardwareReading:
        """One reading; called from a worker thread every few seconds."""


class LiveHardware(HardwareProbe):
    def __init__(self, gpus: GpuProbe | None = None) -> None:
        self._gpus = gpus or NvmlProbe()

    def read(self) -> HardwareReading:
        snapshot = self._gpus.snapshot()
        memory = psutil.virtual_memory()
        host = HostReading(
            # NOTE: interval=None: the load since the previous call, without sleeping.
            cpu_percent=psutil.cpu_percent(interval=None),
            cpu_count=psutil.cpu_count() or 1,
            ram_used_bytes=memory.total - memory.available,
            ram_total_bytes=memory.total,
        )
        return HardwareReading(snapshot.gpus, snapshot.error, host)
