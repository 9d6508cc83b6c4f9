"""Readiness on a remote Docker daemon: this machine's RAM and GPUs do not apply, so the
daemon's own `docker info` (NCPU, MemTotal, the nvidia runtime) is what is checked."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from manager.readiness.blocker import Blocker
from manager.readiness.gpu_passthrough import gpu_passthrough_available
from manager.readiness.memory import MemoryEstimate


@dataclass(frozen=True)
class RemoteDaemonFacts:
    note: str  # the daemon host's resources, as `gomgr doctor` says them
    blockers: tuple[Blocker, ...]


def remote_daemon_facts(
    info: Mapping[str, object], address: str, memory: MemoryEstimate | None
) -> RemoteDaemonFacts:
    """What the daemon at `address` has, and a blocker where the model's estimate (weights,
    KV and overhead, held in host memory on a CPU engine) exceeds its memory."""
    cpus = _number(info.get("NCPU"))
    total = _number(info.get("MemTotal"))
    gpus = "the nvidia runtime (GPUs can be passed)" if gpu_passthrough_available(info) else "no GPU runtime"
    note = (
        f"the Docker daemon at {address} is remote: asked it (docker info) instead of this "
        f"machine: {cpus} CPUs, {total / 1024**3:.1f} GiB memory, {gpus}; its GPUs' memory "
        "is not checked from here"
    )
    if memory is None or total <= 0 or gpu_passthrough_available(info) or memory.total <= total:
        return RemoteDaemonFacts(note, ())
    blocker = Blocker(
        id="remote-memory-too-small",
        title=f"The model needs {memory.total / 1024**3:.1f} GiB; the Docker host has {total / 1024**3:.1f} GiB",
        explanation=(
            f"The daemon at {address} runs engines on its CPUs (no GPU runtime), which hold the "
            "weights and the KV cache in its memory; the estimate does not fit there."
        ),
        fix_steps=(
            "Use a smaller model or a shorter context (--context-length).",
            "Or point DOCKER_HOST at a host with more memory or a GPU runtime.",
        ),
        severity="blocks",
        blocks=("docker",),
    )
    return RemoteDaemonFacts(note, (blocker,))


def _number(value: object) -> int:
    return value if isinstance(value, int) else 0
