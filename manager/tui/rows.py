"""The dashboard's rows: one per engine (its record, the router's state of it and its load,
joined), then one per store model no engine serves (the catalog, loaded or not)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from manager.state.machine import EngineState
from manager.state.records import EngineRecord
from manager.supervisor.engines import EXPIRES_LABEL, NEVER, ON_DEMAND_LABEL
from manager.tui.feed import CatalogModel, LiveRecord
from manager.tui.router_view import RouterView
from manager.tui.throughput import Throughput

CATALOG_ROW_PREFIX = "model:"  # a catalog row's key: no engine id collides with it
UNLOADED = "unloaded"


@dataclass(frozen=True)
class EngineRow:
    id: str  # the engine's id; for a catalog model no engine serves, CATALOG_ROW_PREFIX + name
    model: str  # the repo id or directory it was started from
    served_name: str
    runtime: str | None  # None: no engine (a catalog row)
    state: str  # see display_state; a catalog row: the router's load state, or "unloaded"
    port: int | None
    uptime_s: float | None
    expires: str | None  # when the supervisor unloads it: "in 245s", "due", "pinned", "never"
    inflight: int | None
    tokens_per_s: float | None
    rates: tuple[float, ...]  # tokens/s history for the sparkline

    @property
    def loaded(self) -> bool:
        """An engine row (a catalog row is a model with no engine)."""
        return self.runtime is not None


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


def on_demand(record: EngineRecord) -> bool:
    """Loaded by the supervisor (which unloads it when idle), not started by hand (pinned)."""
    return record.labels.get(ON_DEMAND_LABEL) == "1"


def expiry(record: EngineRecord, now: float) -> str | None:
    """As `gomgr ps` shows it; None while the supervisor has not written it yet."""
    if not on_demand(record):
        return "pinned"
    value = record.labels.get(EXPIRES_LABEL)
    if value is None or value == NEVER:
        return value
    left = float(value) - now
    return f"in {math.ceil(left)}s" if left > 0 else "due"


def engine_rows(
    records: Sequence[LiveRecord],
    router: RouterView,
    throughput: Mapping[str, Throughput],
    now: float,
    catalog: Sequence[CatalogModel] = (),
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
                expires=expiry(live.record, now),
                inflight=load.inflight,
                tokens_per_s=load.tokens_per_s,
                rates=load.rates,
            )
        )
    served = {
        name for live in records
        for name in (live.record.handle.spec.served_name, *live.record.handle.spec.aliases)
    }  # fmt: skip
    rows += [_catalog_row(model) for model in catalog if model.served_name not in served]
    return tuple(rows)


def _catalog_row(model: CatalogModel) -> EngineRow:
    return EngineRow(
        id=CATALOG_ROW_PREFIX + model.served_name, model=model.repo, served_name=model.served_name,
        runtime=None, state=model.state or UNLOADED, port=None, uptime_s=None, expires=None,
        inflight=None, tokens_per_s=None, rates=(),
    )  # fmt: skip
