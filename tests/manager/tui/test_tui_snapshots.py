"""Snapshots of the main screen in its main states, over fixed readings (see conftest.py).

Update after an intended change: `pytest tests/manager/tui/test_tui_snapshots.py --snapshot-update`,
then look at the new SVGs under __snapshots__/ before committing them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot

from manager.readiness.gpu import GpuInfo
from manager.tui.app import DashboardApp
from manager.tui.feed import CatalogModel
from manager.tui.log_pane import LogPane

MakeDashboard = Callable[..., Any]  # the `dashboard` fixture of conftest.py
GIB = 1024**3
SIZE = (130, 34)
FIXED_LOG_LINES = 3  # in the fixed engine's log (conftest.py)
SAMPLES = 9  # metrics samples taken before the screenshot: a full sparkline
SMOLLM2 = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the fixed engine's (conftest.py)


async def settle(pilot: Pilot[Any]) -> None:
    """Wait for the readiness, hardware and router workers and the log's backlog, then sample."""
    app = pilot.app
    assert isinstance(app, DashboardApp)
    await app.workers.wait_for_complete()
    log = app.query_one(LogPane)
    while app.rows and len(log.lines) < FIXED_LOG_LINES:
        await pilot.pause(0.02)
    for _ in range(SAMPLES):
        await app.refresh_engines(sample=True)
    await pilot.pause()


def test_no_engines(snap_compare: Any, dashboard: MakeDashboard) -> None:
    assert snap_compare(dashboard(engines=0), terminal_size=SIZE, run_before=settle)


def test_one_ready_engine(snap_compare: Any, dashboard: MakeDashboard) -> None:
    assert snap_compare(dashboard(engines=1), terminal_size=SIZE, run_before=settle)


def test_an_engine_and_the_store_models_it_does_not_serve(
    snap_compare: Any, dashboard: MakeDashboard
) -> None:
    catalog = (
        CatalogModel(SMOLLM2, SMOLLM2, "loaded"),  # NOTE: the engine's row shows it
        CatalogModel("Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct", "unloaded"),
        CatalogModel("acme/tiny", "tiny", "loading"),
    )
    app = dashboard(engines=1, catalog=catalog)
    assert snap_compare(app, terminal_size=SIZE, run_before=settle)


def test_start_blocked(snap_compare: Any, dashboard: MakeDashboard) -> None:
    assert snap_compare(dashboard(engines=0, blocked=True), terminal_size=SIZE, run_before=settle)


def test_one_ready_engine_on_a_gpu(snap_compare: Any, dashboard: MakeDashboard) -> None:
    gpu = GpuInfo(0, "NVIDIA H100 80GB HBM3", 80 * GIB, 61 * GIB, utilization_percent=43)
    assert snap_compare(dashboard(engines=1, gpus=(gpu,)), terminal_size=SIZE, run_before=settle)
