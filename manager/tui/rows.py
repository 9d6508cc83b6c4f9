"""One dashboard row per engine: its record, the router's state of it, and its load, joined."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from manager.state.machine import EngineState
from manager.tui.feed import LiveRecord
from manager.tui.router_view import RouterView
from manager.tui.throughput import Throughput


@dataclass(frozen=True)
class EngineRow:
    id: str
    model: str  # the repo id or directory it was started from
    served_name: str
    runtime: str
    state: str  # see display_state
    port: int
    uptime_s: float
    inflight: int | None
    tokens_per_s: float | None
    rates: tuple[float, ...]  # tokens/s history for the sparkline


def display_state(live: LiveRecord, router: RouterView) -> str:
    """starting | ready | draining | stopping | unrouted | exited.

    "unrouted": ready but the router does not list it (no router, or one that lost it;
    `gomgr ps` registers it again). "exited": its process is gone (`gomgr ps` cleans up).
    """
    if not live.alive:
        return "exited"
    state = live.record.state
    if state is not EngineState.READY:
        return str(state)
    backend = router.backends.get(live.record.id)
    return "unrouted" if backend is None else backend.state


def engine_rows(
    records: Sequence[LiveRecord],
    router: RouterView,
    throughput: Mapping[str, Throughput],
    now: float,
) -> tuple[EngineRow, ...]:
    rows = []
    for live in records:
        spec = live.record.handle.spec
        load = throughput.get(live.record.id, Throughput())
        rows.append(
            EngineRow(
                id=spec.id,
                model=spec.repo,
                served_name=spec.served_name,
                runtime=live.record.handle.runtime,
                state=display_state(live, router),
                port=spec.port,
                uptime_s=max(0.0, now - live.record.handle.started_at),
                inflight=load.inflight,
                tokens_per_s=load.tokens_per_s,
                rates=load.rates,
            )
        )
    return tuple(rows)
