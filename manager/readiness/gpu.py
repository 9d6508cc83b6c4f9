"""Check 3: the NVIDIA GPUs and driver, seen through NVML behind a small probe interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from manager.readiness.blocker import Blocker


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    total_bytes: int
    free_bytes: int
    utilization_percent: int | None = None  # busy time over NVML's last sample; None: unknown

    def to_dict(self) -> dict[str, object]:
        return {
            "index": self.index,
            "name": self.name,
            "total_bytes": self.total_bytes,
            "free_bytes": self.free_bytes,
        }


@dataclass(frozen=True)
class GpuSnapshot:
    gpus: tuple[GpuInfo, ...]
    driver_version: str | None
    error: str | None  # why NVML gave no answer (no driver, driver not loaded, ...)


class GpuProbe(ABC):
    """What readiness needs to know about GPUs; `NvmlProbe` is the real one."""

    @abstractmethod
    def snapshot(self) -> GpuSnapshot: ...


class NvmlProbe(GpuProbe):
    def snapshot(self) -> GpuSnapshot:
        # NOTE (issue 30): imported where NVML is asked: a start on the process runtime
        # without GPUs asked for plans without it (~0.015 CPU-s).
        import pynvml

        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            # NOTE: no libnvidia-ml.so ("NVML Shared Library Not Found") or a driver that is
            # installed but not loaded: a machine without usable GPUs, not a crash.
            return GpuSnapshot((), None, str(exc))
        try:
            driver = _text(pynvml.nvmlSystemGetDriverVersion())
            gpus = []
            for index in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
                name = _text(pynvml.nvmlDeviceGetName(handle))
                busy = _utilization(handle)
                gpus.append(GpuInfo(index, name, int(memory.total), int(memory.free), busy))
            return GpuSnapshot(tuple(gpus), driver, None)
        except pynvml.NVMLError as exc:
            return GpuSnapshot((), None, str(exc))
        finally:
            pynvml.nvmlShutdown()


def _utilization(handle: object) -> int | None:
    import pynvml

    try:
        return int(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except pynvml.NVMLError:  # NOTE: some GPUs (MIG slices, vGPUs) do not report it
        return None


def _text(value: str | bytes) -> str:
    # NOTE: nvidia-ml-py returns str since 11.515; older releases returned bytes.
    return value.decode() if isinstance(value, bytes) else value


def no_gpu_reason(nvml_error: str | None) -> str:
    if nvml_error is not None:
        return f"no NVIDIA GPU (NVML: {nvml_error})"
    return "no NVIDIA GPU (NVML sees 0 devices)"


def check_gpus(snapshot: GpuSnapshot) -> tuple[Blocker, ...]:
    if snapshot.gpus:
        return ()
    if snapshot.error is not None:
        explanation = (
            f"NVML, the NVIDIA driver's management library, could not start ({snapshot.error}): "
            "there is no usable NVIDIA driver. Engines run on the CPU (slower)."
        )
    else:
        explanation = "The NVIDIA driver is loaded but sees no GPU. Engines run on the CPU."
    return (
        Blocker(
            id="nvidia-gpu-missing",
            title=no_gpu_reason(snapshot.error),
            explanation=explanation,
            fix_steps=(
                (
                    "On a machine with an NVIDIA GPU, install the driver "
                    "(Debian/Ubuntu: `sudo apt-get install nvidia-driver`) and reboot."
                ),
                "Check it with `nvidia-smi`, then run `gomgr doctor` again.",
                "Without a GPU nothing is needed: gomgr uses the process runtime on the CPU.",
            ),
            severity="blocks",
            blocks=("gpu", "docker-gpu"),
        ),
    )
