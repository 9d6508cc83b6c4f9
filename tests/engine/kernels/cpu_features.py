"""The CPU's feature flags (``/proc/cpuinfo``), for tests of kernel paths only some CPUs run."""

from __future__ import annotations

from pathlib import Path

import pytest


def _flags() -> frozenset[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return frozenset(line.split(":", 1)[1].split())
    return frozenset()


CPU_FLAGS = _flags()


def require_cpu(*flags: str) -> None:
    """Skips the test, naming the features this CPU lacks, unless it has all of ``flags``."""
    missing = [flag for flag in flags if flag not in CPU_FLAGS]
    if missing:
        pytest.skip(f"this path needs a CPU with {', '.join(missing)}")
