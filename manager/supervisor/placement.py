"""Where an engine goes: the device with the most room that fits its footprint.

Room on a device is its measured free memory less what the supervisor's engines still starting
there will take, and at most its total less every footprint the supervisor placed there (Ollama's
rule: an engine's memory may show as used only once it touches it, so neither number alone is
safe).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from manager.readiness.memory import GIB
from manager.supervisor.footprint import Footprint
from manager.supervisor.memory import DeviceMemory


@dataclass(frozen=True)
class Reservation:
    """One engine the supervisor placed: where, and its footprint."""

    gpu: int | None
    size: int
    running: bool  # started: its memory shows in the device's free bytes already


def room(device: DeviceMemory, reservations: Sequence[Reservation]) -> int:
    here = [r for r in reservations if r.gpu == device.gpu]
    starting = sum(r.size for r in here if not r.running)
    return max(0, min(device.free_bytes - starting, device.total_bytes - sum(r.size for r in here)))


def room_alone(device: DeviceMemory, reservations: Sequence[Reservation]) -> int:
    """The room with every engine the supervisor placed on `device` unloaded."""
    freed = sum(r.size for r in reservations if r.gpu == device.gpu and r.running)
    return min(device.free_bytes + freed, device.total_bytes)


def place(
    need: int, devices: Sequence[DeviceMemory], reservations: Sequence[Reservation]
) -> DeviceMemory | None:
    """The device with the most room, if that room holds `need`."""
    best = max(devices, key=lambda d: room(d, reservations), default=None)
    return best if best is not None and room(best, reservations) >= need else None


def could_fit(
    need: int, devices: Sequence[DeviceMemory], reservations: Sequence[Reservation]
) -> list[DeviceMemory]:
    """The devices where `need` fits once the supervisor's engines there are unloaded."""
    return [d for d in devices if room_alone(d, reservations) >= need]


def does_not_fit(
    name: str, footprint: Footprint, devices: Sequence[DeviceMemory],
    reservations: Sequence[Reservation],
) -> str:
    """Why `name` can never load here, with the numbers of the device closest to fitting."""
    best = max(devices, key=lambda d: room_alone(d, reservations))
    free = room_alone(best, reservations)
    return (
        f"{name} needs {footprint.describe()} but {best.name} has {free / GIB:.2f} GiB free of "
        f"{best.total_bytes / GIB:.2f} GiB, even with every model gomgr loaded unloaded; free "
        "memory (other engines: gomgr ps; other programs) or pick a smaller model"
    )
