"""Readiness: can this machine start an engine for a model, and with which runtime?

Each check probes the real environment and returns typed Blockers (plain explanation,
numbered fix steps, the options they take away); `check_for_start` runs them all into a
ReadinessReport before anything is downloaded, and `choose_runtime` picks `--runtime auto`.
"""

from manager.readiness.blocker import Blocker, Option, Severity
from manager.readiness.gpu import GpuInfo, GpuProbe, GpuSnapshot, NvmlProbe
from manager.readiness.memory import MemoryEstimate, estimate_memory
from manager.readiness.report import ReadinessReport
from manager.readiness.runtime import choose_runtime
from manager.readiness.start import check_for_start

__all__ = [
    "Blocker",
    "GpuInfo",
    "GpuProbe",
    "GpuSnapshot",
    "MemoryEstimate",
    "NvmlProbe",
    "Option",
    "ReadinessReport",
    "Severity",
    "check_for_start",
    "choose_runtime",
    "estimate_memory",
]
