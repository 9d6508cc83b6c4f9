"""What `gomgr start` asks for and what it answers: plain data, light to import.

NOTE (issue 30): apart from `start_engine` (manager/lifecycle/start.py), whose planning imports
readiness: 0.9 s of the 1.0 s `gomgr start` spent importing its supervisor client on a loaded
2-core machine, before the request was even sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from manager.state.records import EngineRecord


@dataclass(frozen=True)
class StartRequest:
    repo: str  # repo id or model directory
    runtime: str  # "auto" or a runtime name
    port: int | None  # the engine's port; None: a free one
    served_name: str | None  # None: the manifest's, else the repo id
    timeout_s: float
    # NOTE: containers: "auto" (where NVML sees GPUs), "all" or "none"; any runtime: the GPU
    # indices the engine is pinned to ("0,1": docker device_ids, CUDA_VISIBLE_DEVICES).
    gpus: str = "auto"
    aliases: tuple[str, ...] = ()
    variant: str | None = None  # a manifest name layered over the matched one
    labels: dict[str, str] = field(default_factory=dict)  # kept in the record (gomgr apply's)
    kv_tokens: int | None = None  # the engine's KV pool, its share where several run; None: its own
    # NOTE (issue 27): replica `replica` (0-based) of `replicas` of one model: its GPUs or
    # CPUs are its share of the machine (manager/lifecycle/replicas.py); `port` is its own.
    replica: int = 0
    replicas: int = 1
    cpus: tuple[int, ...] = ()  # a CPU share to keep (a restarted replica's); (): from the above


@dataclass(frozen=True)
class Started:
    record: EngineRecord
    router_url: str
    runtime_reason: str
