"""Make the records and the router match what actually runs.

Run at the start of `gomgr ps`, `start` and `stop` (and by `gomgr router start`):
- a record whose process or container is gone (crashed, killed, machine rebooted) is
  removed, its route deregistered and an exited container removed; its log is kept for the
  post-mortem;
- a healthy container of ours that has no record (a manager that lost its state dir) is
  adopted from its labels;
- when a router answers, every ready engine it does not list is registered again (a router
  that was restarted has forgotten them).
"""

from __future__ import annotations

from dataclasses import dataclass

from manager.lifecycle.router_link import RouterLink
from manager.runtimes.docker_host import daemon_socket_missing
from manager.runtimes.registry import DOCKER, get_runtime
from manager.state.machine import EngineState
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord, RecordStore

HEALTH_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Reconciled:
    live: tuple[EngineRecord, ...]
    removed: tuple[EngineRecord, ...]  # found dead and cleaned up
    reregistered: tuple[str, ...]  # engine ids registered again with the router
    routed: frozenset[str] | None  # ids the router lists; None when no router answers


def _adopt_containers(
    paths: StatePaths, records: RecordStore, known: set[str]
) -> list[EngineRecord]:
    if daemon_socket_missing():
        # NOTE: no daemon, no containers: the SDK would fail to connect and list none; this
        # answer costs no import of the SDK.
        return []
    adopted = []
    for handle in get_runtime(DOCKER, paths).list_running():
        if handle.id in known or not _healthy(handle.spec.base_url):
            continue
        record = EngineRecord(handle, EngineState.READY)
        records.save(record)
        adopted.append(record)
    return adopted


def _healthy(base_url: str) -> bool:
    # NOTE (issue 30): imported where a container is asked, so a cold `gomgr start` spawns
    # its engine before the supervisor imports httpx (~0.08 CPU-s).
    import httpx

    try:
        return httpx.get(f"{base_url}/health", timeout=HEALTH_TIMEOUT_S).status_code == 200
    except httpx.TransportError:
        return False


def reconcile(paths: StatePaths, router: RouterLink | None) -> Reconciled:
    """`router` None: the records only, as if no router answered (a supervisor still booting,
    which routes the live engines itself once it serves)."""
    records = RecordStore(paths)
    live: list[EngineRecord] = []
    removed: list[EngineRecord] = []
    for record in records.all():
        if get_runtime(record.handle.runtime, paths).is_alive(record.handle):
            live.append(record)
        else:
            removed.append(record)
    live.extend(_adopt_containers(paths, records, {r.id for r in (*live, *removed)}))
    routed_by = router if router is not None and router.is_up() else None
    for record in removed:
        if routed_by is not None:
            routed_by.deregister(record.id)
        get_runtime(record.handle.runtime, paths).stop(record.handle)
        records.remove(record.id, keep_log=True)
    if routed_by is None:
        return Reconciled(tuple(live), tuple(removed), (), None)
    routed = routed_by.backend_ids()
    reregistered: list[str] = []
    for record in live:
        if record.state is EngineState.READY and record.id not in routed:
            routed_by.register(record)
            reregistered.append(record.id)
    return Reconciled(tuple(live), tuple(removed), tuple(reregistered), frozenset(routed | set(reregistered)))
