"""`gomgr restart` (and the TUI's `r`): stop one engine and start it again as it was."""

from __future__ import annotations

from collections.abc import Callable

from manager.lifecycle.errors import EngineNotFound
from manager.lifecycle.gpus import CUDA_VISIBLE_DEVICES
from manager.lifecycle.health_wait import never
from manager.lifecycle.reconcile import reconcile
from manager.lifecycle.replicas import cpus_of
from manager.lifecycle.router_link import RouterLink
from manager.lifecycle.start import start_engine
from manager.lifecycle.start_request import Started, StartRequest
from manager.lifecycle.start_timeout import DEFAULT_START_TIMEOUT_S
from manager.lifecycle.stop import find_engines, stop_record
from manager.models.progress import Progress
from manager.runtimes.base import EngineSpec
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord


def restart_request(record: EngineRecord, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> StartRequest:
    """The start that gives `record`'s engine back: same model, runtime, port, names, GPUs,
    manifest variant, labels (so `gomgr apply` still owns an engine it started, and its
    spec hash still describes what runs) and a replica's CPU share. The manifests are read
    anew, as with a stop and a start."""
    spec = record.handle.spec
    return StartRequest(
        spec.repo, record.handle.runtime, spec.port, spec.served_name, timeout_s,
        gpus=_gpus(spec), aliases=spec.aliases, variant=record.variant, labels=dict(record.labels),
        cpus=cpus_of(spec.env),
    )


def _gpus(spec: EngineSpec) -> str:
    """The `--gpus` the engine was started with: its pins, else what its container got."""
    if spec.container is None:
        return dict(spec.env).get(CUDA_VISIBLE_DEVICES, "auto")
    if not spec.container.gpus:
        return "none"
    return ",".join(spec.container.gpu_ids) or "all"


def restart_engine(
    paths: StatePaths, target: str, progress: Progress, announce: Callable[[str], None],
    timeout_s: float = DEFAULT_START_TIMEOUT_S, cancelled: Callable[[], bool] = never,
) -> Started:
    router = RouterLink.from_paths(paths)
    chosen = find_engines(list(reconcile(paths, router).live), target)
    if not chosen:
        raise EngineNotFound(f"no running engine has the id or served name '{target}' (see gomgr ps)")
    if len(chosen) > 1:
        ids = ", ".join(r.id for r in chosen)
        raise EngineNotFound(f"'{target}' names {len(chosen)} engines ({ids}): give one id")
    [record] = chosen
    request = restart_request(record, timeout_s)
    progress.step(f"Stopping engine {record.id}")
    stop_record(record, paths, router)
    return start_engine(request, paths, progress, announce, cancelled)
