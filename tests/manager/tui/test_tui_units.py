"""The dashboard's pure parts: router event folding, row states, throughput, table cells."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from manager.state.machine import EngineState
from manager.state.records import EngineRecord
from manager.tui.engines_table import sparkline, uptime
from manager.tui.feed import CatalogModel, LiveRecord
from manager.tui.metrics import MetricsSample
from manager.tui.router_view import RouterView
from manager.tui.rows import display_state, engine_rows
from manager.tui.throughput import HISTORY, Throughput


def _backend(backend_id: str, state: str) -> dict[str, object]:
    return {"id": backend_id, "model": "m", "state": state, "base_url": "http://127.0.0.1:1"}


def test_router_view_folds_the_event_stream() -> None:
    view = RouterView("http://r", up=False).applied(
        {"type": "snapshot", "backends": [_backend("a", "ready")]}
    )
    assert view.up and set(view.backends) == {"a"}
    view = view.applied({"type": "registered", "reason": "", "backend": _backend("b", "starting")})
    view = view.applied({"type": "state", "reason": "healthy", "backend": _backend("b", "ready")})
    assert {k: b.state for k, b in view.backends.items()} == {"a": "ready", "b": "ready"}
    view = view.applied({"type": "removed", "reason": "dead", "backend": _backend("a", "dead")})
    assert set(view.backends) == {"b"}


def test_row_state_joins_record_process_and_router(
    make_record: Callable[[EngineState], EngineRecord],
) -> None:
    ready = make_record(EngineState.READY)
    routed = RouterView("http://r", True).applied(
        {"type": "snapshot", "backends": [_backend(ready.id, "draining")]}
    )
    empty = RouterView("http://r", True)
    assert display_state(LiveRecord(ready, True), routed) == "draining"
    assert display_state(LiveRecord(ready, True), empty) == "unrouted"
    assert display_state(LiveRecord(ready, False), routed) == "exited"
    starting = make_record(EngineState.STARTING)
    assert display_state(LiveRecord(starting, True), empty) == "starting"


def test_throughput_from_counter_samples() -> None:
    load = Throughput()
    for at, tokens in ((0.0, 100.0), (2.0, 140.0), (3.0, 140.0)):
        load = load.add(MetricsSample(at, 1, tokens))
    assert load.rates == (20.0, 0.0) and load.tokens_per_s == 0.0 and load.inflight == 1
    restarted = load.add(MetricsSample(4.0, 0, 5.0))  # NOTE: a counter that went down
    assert restarted.rates == load.rates and restarted.last == MetricsSample(4.0, 0, 5.0)
    without_metrics = Throughput().add(MetricsSample(0.0, 3, None)).add(MetricsSample(1.0, 2, None))
    assert without_metrics.tokens_per_s is None and without_metrics.inflight == 2
    for second in range(HISTORY + 5):
        load = load.add(MetricsSample(5.0 + second, 0, 200.0 + second))
    assert len(load.rates) == HISTORY


def test_table_cells() -> None:
    assert [uptime(s) for s in (42, 185, 7620, 273600)] == ["42s", "3m05s", "2h07m", "3d04h"]
    assert sparkline((0.0, 5.0, 10.0), width=4) == " ▁▅█"
    assert sparkline((0.0, 0.0), width=2) == "▁▁"


def test_rows_are_the_engines_then_the_store_models_no_engine_serves(
    make_record: Callable[[EngineState], EngineRecord],
) -> None:
    pinned = make_record(EngineState.READY)
    loaded = dataclasses.replace(
        pinned, labels={"gomgr.on_demand": "1", "gomgr.expires_at": "1000"}
    )
    router = RouterView("http://r", True)
    catalog = (
        CatalogModel("org/b", "b", "unloaded"),
        CatalogModel(pinned.handle.spec.repo, pinned.handle.spec.served_name, "loaded"),
        CatalogModel("org/c", "c", None),
    )
    rows = engine_rows((LiveRecord(pinned, True),), router, {}, 900.0, catalog)
    assert [(r.served_name, r.state, r.expires, r.loaded) for r in rows] == [
        (pinned.handle.spec.served_name, "unrouted", "pinned", True),
        ("b", "unloaded", None, False),
        ("c", "unloaded", None, False),  # NOTE: no router answers: nothing is loaded
    ]
    [row] = engine_rows((LiveRecord(loaded, True),), router, {}, 900.0)
    assert row.expires == "in 100s"
    [row] = engine_rows((LiveRecord(loaded, True),), router, {}, 1000.5)
    assert row.expires == "due"
