"""ReadinessReport: what the checks found (facts) and what they block (blockers)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from manager.readiness.blocker import Blocker, Option
from manager.readiness.gpu import GpuInfo
from manager.readiness.memory import MemoryEstimate
from manager.readiness.weights import WeightsSize

# NOTE: a container with `--gpus all` is blocked by whatever blocks the GPU and GPU
# passthrough as well as by what blocks Docker itself; a CPU container only by the latter.
_OPTIONS_OF_RUNTIME: dict[str, tuple[Option, ...]] = {
    "docker": ("docker",),
    "process": ("process",),
}
_GPU_OPTIONS: tuple[Option, ...] = ("gpu", "docker-gpu")


@dataclass(frozen=True)
class ReadinessReport:
    target: str | None  # the repo id or model directory asked about; None: the machine only
    requested_runtime: str  # "auto", "docker" or "process"
    checks: tuple[str, ...]  # names of the checks that ran, in order
    blockers: tuple[Blocker, ...]
    notes: tuple[str, ...]  # checks skipped and why (e.g. the hub cannot be reached)
    docker_host: str | None  # None: Docker was not checked (--runtime process)
    docker_reachable: bool | None
    docker_remote: bool  # DOCKER_HOST (or the docker context) names a tcp:// or ssh:// daemon
    gpu_passthrough: bool | None  # None: not checked (no reachable daemon)
    gpus: tuple[GpuInfo, ...]
    nvml_error: str | None
    driver_version: str | None
    model_dir: Path | None  # the local copy measured; None: sized from the hub, or unknown
    weights: WeightsSize | None
    memory: MemoryEstimate | None
    context_tokens: int | None
    free_disk_bytes: int
    port: int | None
    runtime_hint: tuple[str, str] | None  # choose_runtime's (runtime, reason)

    def blocking(self, runtime: str, gpus: bool | None = None) -> tuple[Blocker, ...]:
        """The blockers that stop a start with `runtime` ("docker" or "process").

        `gpus`: whether a container would get `--gpus all`; None means "where NVML sees GPUs".
        """
        options = _OPTIONS_OF_RUNTIME[runtime]
        if runtime == "docker" and (bool(self.gpus) if gpus is None else gpus):
            options = options + _GPU_OPTIONS
        return tuple(b for b in self.blockers if any(b.blocks_option(o) for o in options))

    def default_runtime(self) -> str:
        """The runtime a start would use: the requested one, or auto's choice."""
        if self.requested_runtime != "auto" or self.runtime_hint is None:
            return self.requested_runtime
        return self.runtime_hint[0]

    def ready(self) -> bool:
        """True when nothing blocks a start on the default runtime."""
        return not self.blocking(self.default_runtime())

    def to_dict(self) -> dict[str, object]:
        hint = self.runtime_hint
        return {
            "target": self.target,
            "ready": self.ready(),
            "requested_runtime": self.requested_runtime,
            "runtime": self.default_runtime(),
            "runtime_reason": hint[1] if hint else None,
            "checks": list(self.checks),
            "blockers": [b.to_dict() for b in self.blockers],
            "notes": list(self.notes),
            "docker": {
                "host": self.docker_host,
                "reachable": self.docker_reachable,
                "gpu_passthrough": self.gpu_passthrough,
                "remote": self.docker_remote,
            },
            "gpus": [g.to_dict() for g in self.gpus],
            "nvml_error": self.nvml_error,
            "driver_version": self.driver_version,
            "model_dir": str(self.model_dir) if self.model_dir else None,
            "weights": (
                {
                    "total_bytes": self.weights.total_bytes,
                    "source": self.weights.source,
                    "bytes_by_dtype": self.weights.bytes_by_dtype,
                }
                if self.weights
                else None
            ),
            "memory": self.memory.to_dict() if self.memory else None,
            "context_tokens": self.context_tokens,
            "free_disk_bytes": self.free_disk_bytes,
            "port": self.port,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)
