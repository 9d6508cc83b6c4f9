"""Replicas: N engines of one model, each on its own port and its own GPU(s) or CPU share,
all registered with the router under the one served name (which routes over them).

Replica i of N listens on `port + i` when a port is given; its share of the machine is:
- GPUs pinned by hand (`--gpus 0,1,2,3`): the list cut into N equal groups, in order;
- GPUs that NVML sees (`auto` or `all`): as many each as divide evenly, in index order;
- no GPU (or `--gpus none`): the CPUs this process may use, cut into N groups; each replica
  runs that many OpenMP threads bound to its own cores (`GOMP_CPU_AFFINITY`, which our
  engine leaves to the operator once set). With more replicas than CPUs, they share cores.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from manager.lifecycle.errors import StartBlocked
from manager.lifecycle.gpus import gpu_pins

OMP_THREADS = "OMP_NUM_THREADS"
OMP_AFFINITY = "GOMP_CPU_AFFINITY"


@dataclass(frozen=True)
class ReplicaShare:
    gpus: str  # the replica's --gpus
    env: tuple[tuple[str, str], ...]  # for a CPU share: its thread count and binding


def replica_port(port: int | None, replica: int) -> int | None:
    return None if port is None else port + replica


def replica_share(gpus: str, replica: int, replicas: int, gpus_seen: int) -> ReplicaShare:
    """The share of replica `replica` (0-based) of `replicas`; StartBlocked when the GPUs do
    not divide. `gpus_seen`: how many GPUs NVML sees (asked only where `gpus` pins none)."""
    if replicas == 1:
        return ReplicaShare(gpus, ())
    pinned = gpu_pins(gpus)
    if not pinned and gpus != "none" and gpus_seen:
        pinned = tuple(range(gpus_seen))
    if pinned:
        if len(pinned) < replicas:
            raise StartBlocked(
                f"{replicas} replicas need at least {replicas} GPUs, one each; "
                f"{len(pinned)} {'are pinned' if gpu_pins(gpus) else 'are visible'}",
                "give fewer --replicas, or more GPUs with --gpus",
            )
        each = len(pinned) // replicas
        group = pinned[replica * each : (replica + 1) * each]
        return ReplicaShare(",".join(map(str, group)), ())
    cpus = cpu_share(sorted(os.sched_getaffinity(0)), replica, replicas)
    return ReplicaShare(gpus, cpu_env(cpus))


def cpu_env(cpus: Sequence[int]) -> tuple[tuple[str, str], ...]:
    """The environment that gives an engine the CPUs `cpus`: one OpenMP thread bound to each."""
    return ((OMP_THREADS, str(len(cpus))), (OMP_AFFINITY, " ".join(map(str, cpus))))


def cpus_of(env: Sequence[tuple[str, str]]) -> tuple[int, ...]:
    """The CPU share `cpu_env` gave an engine, read back from its environment; () for none."""
    bound = dict(env).get(OMP_AFFINITY, "")
    return tuple(int(c) for c in bound.split()) if bound.replace(" ", "").isdigit() else ()


def cpu_share(cpus: Sequence[int], replica: int, replicas: int) -> tuple[int, ...]:
    """Replica `replica`'s CPUs: an equal slice of `cpus`, or one shared core when too few."""
    each = len(cpus) // replicas
    if each == 0:
        return (cpus[replica % len(cpus)],)
    return tuple(cpus[replica * each : (replica + 1) * each])
