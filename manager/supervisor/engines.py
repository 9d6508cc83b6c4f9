"""The supervisor's engine work, run in worker threads: start one on demand, stop it, label it.

NOTE: one start path: `start_engine`, as `gomgr start` runs it, registers the engine over the
router's admin API, which is this very process (its event loop stays free meanwhile).
"""

from __future__ import annotations

import dataclasses
import logging

from manager.lifecycle.desired_state import DesiredEngine
from manager.lifecycle.errors import LifecycleError
from manager.lifecycle.router_link import RouterLink
from manager.lifecycle.start import start_engine
from manager.lifecycle.start_request import StartRequest
from manager.lifecycle.stop import stop_record
from manager.models.progress import SilentProgress
from manager.runtimes.registry import get_runtime
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord, RecordStore
from manager.supervisor.engine_messages import StartBody
from manager.supervisor.footprint import Footprint
from router.keep_alive import parse_keep_alive

logger = logging.getLogger(__name__)

ON_DEMAND_LABEL = "gomgr.on_demand"  # "1": loaded by the supervisor, unloaded when idle
EXPIRES_LABEL = "gomgr.expires_at"  # unix seconds, or "never"; `gomgr ps` shows it
NEVER = "never"


def start_on_demand(
    repo: str, served_name: str, aliases: tuple[str, ...], paths: StatePaths, timeout_s: float,
    gpu: int | None, footprint: Footprint | None, entry: DesiredEngine | None = None,
) -> EngineRecord:
    """Start and register an engine for `repo` on GPU `gpu` (None: the host), told the KV
    share its footprint counts; a desired-state `entry` adds its runtime, port, variant and
    `gomgr apply`'s labels. LifecycleError as `gomgr start` raises it."""
    request = StartRequest(
        repo=repo, runtime=entry.runtime if entry else "auto", port=entry.port if entry else None,
        served_name=served_name, timeout_s=timeout_s, gpus="auto" if gpu is None else str(gpu),
        aliases=aliases, variant=entry.variant if entry else None,
        labels={**(entry.labels() if entry else {}), ON_DEMAND_LABEL: "1"},
        kv_tokens=footprint.context_tokens if footprint else None,
    )
    return start_engine(request, paths, SilentProgress(), logger.info).record


def requested_start(body: StartBody) -> tuple[StartRequest, float | None]:
    """The start `body` asks for, and its keep-alive in seconds (None: pinned, never unloaded
    when idle); RouterError (400) for a keep-alive that does not parse."""
    keep_alive_s = parse_keep_alive(body.keep_alive)
    labels = dict(body.labels)
    if keep_alive_s is not None:
        labels[ON_DEMAND_LABEL] = "1"
    request = StartRequest(
        repo=body.repo, runtime=body.runtime, port=body.port, served_name=body.served_name,
        timeout_s=body.timeout_s, gpus=body.gpus, aliases=body.aliases, variant=body.variant,
        labels=labels, replica=body.replica, replicas=body.replicas,
    )
    return request, keep_alive_s


def failure_message(exc: BaseException) -> str:
    """The cause, and the engine log's last line when the error carries the log."""
    if not isinstance(exc, LifecycleError):
        return f"{type(exc).__name__}: {exc}"
    lines = [line for line in exc.details.splitlines() if line.strip()]
    return f"{exc.message}; last log line: {lines[-1].strip()}" if lines else exc.message


def stop_on_demand(record: EngineRecord, paths: StatePaths) -> None:
    """Deregister the engine (if the router still answers), end it, remove its record."""
    stop_record(record, paths, RouterLink.from_paths(paths))


def write_expiry(record: EngineRecord, expires_at: float | None, paths: StatePaths) -> EngineRecord:
    labels = {**record.labels, EXPIRES_LABEL: NEVER if expires_at is None else f"{expires_at:.0f}"}
    updated = dataclasses.replace(record, labels=labels)
    RecordStore(paths).save(updated)
    return updated


def running_engines(paths: StatePaths) -> list[EngineRecord]:
    """The live engines of the state root: what a restarted supervisor adopts (those it loaded
    back into their slots, the rest routed as pinned), `router stop` ends (those it loaded)."""
    return [r for r in RecordStore(paths).all() if get_runtime(r.handle.runtime, paths).is_alive(r.handle)]


def loaded_on_demand(record: EngineRecord) -> bool:
    return record.labels.get(ON_DEMAND_LABEL) == "1"
