"""The dashboard app: engines and the store's models, hardware, readiness and logs; start,
stop and restart by key.

Live data: the router's event stream (changes as they happen), the engine records, the
catalog's load states and one metrics request per engine every second, a hardware reading
every two seconds. Start, stop and restart ask the supervisor (on_demand.py: a store model
loads through the router, the rest goes through its engine API), in worker threads, so the
screen never freezes.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any, ClassVar

import httpx
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widgets import DataTable, Footer, Header, Static

from manager.lifecycle.errors import LifecycleError
from manager.models.errors import ModelError
from manager.readiness.report import ReadinessReport
from manager.state.machine import EngineState
from manager.state.records import EngineRecord
from manager.supervisor.engine_client import EngineClient
from manager.tui.activity import ActivityLine, ActivityProgress
from manager.tui.banner import Failure, ReadinessBanner
from manager.tui.doctor_screen import DoctorScreen
from manager.tui.engines_table import EnginesTable
from manager.tui.feed import CatalogModel, LiveRecord
from manager.tui.hardware import HardwareReading
from manager.tui.hardware_panel import HardwarePanel
from manager.tui.log_pane import LogPane
from manager.tui.metrics import MetricsSample
from manager.tui.on_demand import restart, start
from manager.tui.picker import StartPicker
from manager.tui.router_view import RouterView
from manager.tui.rows import EngineRow, engine_rows
from manager.tui.sources import Sources
from manager.tui.throughput import Throughput

Operation = Callable[[ActivityProgress], Any]


class DashboardApp(App[None]):
    TITLE = "gomgr"
    CSS = """
    #banner { height: auto; max-height: 14; padding: 0 1; }
    #banner.blocked { border: heavy $error; }
    #engines-box { height: 1fr; min-height: 6; border: round $primary; }
    #engines { height: auto; max-height: 100%; }
    #no-engines { padding: 1 2; color: $text-muted; }
    #bottom { height: 1fr; max-height: 14; }
    #logs { width: 1fr; border: round $primary; }
    #hardware { width: 44; height: 100%; border: round $primary; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "start", "Start"),
        Binding("x", "stop", "Stop"),
        Binding("r", "restart", "Restart"),
        Binding("l", "logs", "Logs"),
        Binding("d", "doctor", "Doctor"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, sources: Sources) -> None:
        super().__init__()
        self.sources = sources
        self.router = RouterView("", up=False, problem="connecting…")
        self.live: tuple[LiveRecord, ...] = ()
        self.catalog: tuple[CatalogModel, ...] = ()
        self.rows: tuple[EngineRow, ...] = ()
        self.throughput: dict[str, Throughput] = {}
        self.report: ReadinessReport | None = None
        self.failure: Failure | None = None
        self._quit_asked = False
        self._operation_ids = itertools.count()

    def compose(self) -> ComposeResult:
        yield Header()
        yield ReadinessBanner(id="banner")
        with Vertical(id="engines-box"):
            yield EnginesTable(id="engines")
            yield Static("no engines running: press s to start one", id="no-engines")
        yield ActivityLine(id="activity")
        with Horizontal(id="bottom"):
            yield LogPane(id="logs")
            yield HardwarePanel(id="hardware")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#engines-box").border_title = "models"
        self.sub_title = "router: connecting…"
        self._follow_router()
        self._check_readiness()
        self._read_hardware()
        self._refresh()
        if interval := self.sources.metrics_interval_s:
            self.set_interval(interval, lambda: self._refresh(sample=True))
        if interval := self.sources.hardware_interval_s:
            self.set_interval(interval, self._read_hardware)

    async def on_unmount(self) -> None:
        await self.sources.feed.close()

    # -- live data ---------------------------------------------------------------------

    @work(exclusive=True, group="router")
    async def _follow_router(self) -> None:
        async for view in self.sources.feed.router_views():
            if view != self.router:
                self.router = view
                self._refresh()

    async def refresh_engines(self, sample: bool = False) -> None:
        """Read the engine records and the catalog again, with `sample` one metrics request to
        each ready engine, and redraw the table."""
        self.live = await asyncio.to_thread(self.sources.feed.records)
        self.catalog = await asyncio.to_thread(self.sources.feed.catalog)
        alive = {item.record.id for item in self.live if item.alive}
        self.throughput = {k: v for k, v in self.throughput.items() if k in alive}
        if sample:
            await self._sample([i.record for i in self.live if i.record.id in alive])
        self._show_rows()

    def _refresh(self, sample: bool = False) -> None:
        # NOTE: a tick replaces the previous one if that still runs (an engine slow to answer
        # its metrics), so ticks never pile up; a change is always shown.
        self.run_worker(
            self.refresh_engines(sample), group="tick" if sample else "change", exclusive=sample
        )

    async def _sample(self, alive: list[EngineRecord]) -> None:
        ready = [r for r in alive if r.state is EngineState.READY]
        samples = await asyncio.gather(
            *(self.sources.feed.sample(r) for r in ready), return_exceptions=True
        )
        for record, sample in zip(ready, samples, strict=True):
            if isinstance(sample, MetricsSample):
                previous = self.throughput.get(record.id, Throughput())
                self.throughput[record.id] = previous.add(sample)
            elif not isinstance(sample, httpx.HTTPError | ValueError):
                raise sample  # NOTE: an HTTP or parse error skips one sample; others are bugs

    def _show_rows(self) -> None:
        self.rows = engine_rows(
            self.live, self.router, self.throughput, self.sources.clock(), self.catalog
        )
        try:
            table = self.query_one(EnginesTable)
        except NoMatches:
            return  # NOTE: the app is closing: a tick that was still sampling outlived the widgets
        table.show(self.rows)
        self.query_one("#no-engines").display = not self.rows
        self.sub_title = _router_line(self.router)
        self._follow_selected()

    def on_data_table_row_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self._follow_selected()

    def _follow_selected(self) -> None:
        record = self._selected()
        runtime = self.sources.feed.runtime(record.handle.runtime) if record else None
        self.query_one(LogPane).follow(record, runtime)

    @work(thread=True, exclusive=True, group="readiness")
    def _check_readiness(self) -> None:
        report = self.sources.readiness()
        self._post(self._readiness_known, report)

    def _readiness_known(self, report: ReadinessReport) -> None:
        self.report = report
        self._show_banner()
        if isinstance(self.screen, DoctorScreen):
            self.screen.show(report)

    @work(thread=True, exclusive=True, group="hardware")
    def _read_hardware(self) -> None:
        reading = self.sources.hardware.read()
        self._post(self._hardware_read, reading)

    def _hardware_read(self, reading: HardwareReading) -> None:
        self.query_one(HardwarePanel).show(reading)

    def _show_banner(self) -> None:
        self.query_one(ReadinessBanner).show(self.report, self.failure)

    # -- keys --------------------------------------------------------------------------

    def action_start(self) -> None:
        """On a store model that is not loaded: load it; otherwise the picker."""
        row = self._selected_row()
        if row is not None and not row.loaded:
            self._start_chosen(row.model)
        else:
            self.push_screen(StartPicker(self.sources.store), self._start_chosen)

    def _start_chosen(self, repo: str | None) -> None:
        if repo is None:
            return
        model = next((m for m in self.catalog if m.repo == repo), None)
        self._operate(
            f"starting {repo}",
            lambda p: start(self._client(), repo, model, p, self._announce_ready, self._say),
        )

    def action_stop(self) -> None:
        if (record := self._selected_or_say()) is not None:
            self._operate(f"stopping {record.id}", lambda _: self._client().stop(record.id))

    def action_restart(self) -> None:
        if (record := self._selected_or_say()) is not None:
            self._operate(
                f"restarting {record.id}",
                lambda p: restart(self._client(), record, p, self._announce_ready, self._say),
            )

    def action_logs(self) -> None:
        logs = self.query_one(LogPane)
        if self.screen.maximized is logs:
            self.screen.minimize()
        else:
            self.screen.maximize(logs)

    def action_doctor(self) -> None:
        self.push_screen(DoctorScreen(self.report))
        self._check_readiness()

    async def action_quit(self) -> None:
        if self.query_one(ActivityLine).busy and not self._quit_asked:
            self._quit_asked = True
            self.notify(
                "an operation is running; q again quits once it has finished",
                severity="warning",
            )
            return
        self.exit()

    # -- operations (worker threads) ---------------------------------------------------

    def _announce_ready(self, served_name: str, router_url: str) -> None:
        self._post(self.notify, f"{served_name} is ready: {router_url}/v1", title="ready")

    def _say(self, line: str) -> None:
        self._post(self.notify, line)

    def _client(self) -> EngineClient:
        return EngineClient.from_paths(self.sources.paths)

    def _operate(self, what: str, operation: Operation) -> None:
        self.failure = None
        self._show_banner()
        self._run(what, operation)

    @work(thread=True, group="lifecycle")
    def _run(self, what: str, operation: Operation) -> None:
        key = str(next(self._operation_ids))
        progress = ActivityProgress(lambda line: self._post(self._activity, key, line), what)
        progress.step("…")
        try:
            operation(progress)
        except (LifecycleError, ModelError) as exc:
            details = exc.details if isinstance(exc, LifecycleError) else ""
            self._post(self._failed, Failure(f"{what}: {exc.message}", details))
        finally:
            self._post(self._activity, key, None)
            self._post(self._refresh)

    def _activity(self, key: str, line: str | None) -> None:
        self.query_one(ActivityLine).set(key, line)

    def _failed(self, failure: Failure) -> None:
        self.failure = failure
        self._show_banner()

    def _post(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Run `callback` on the UI thread, from a worker thread; nothing once the app exited."""
        try:
            self.call_from_thread(callback, *args, **kwargs)
        except RuntimeError:
            if self.is_running:
                raise

    # -- selection ---------------------------------------------------------------------

    def _selected(self) -> EngineRecord | None:
        engine_id = self.query_one(EnginesTable).selected_id()
        return next((i.record for i in self.live if i.record.id == engine_id), None)

    def _selected_row(self) -> EngineRow | None:
        row_id = self.query_one(EnginesTable).selected_id()
        return next((row for row in self.rows if row.id == row_id), None)

    def _selected_or_say(self) -> EngineRecord | None:
        record = self._selected()
        if record is None:
            row = self._selected_row()
            said = f"{row.served_name} is not loaded: s loads it" if row else "no engine selected"
            self.notify(said, severity="warning")
        return record


def _router_line(router: RouterView) -> str:
    if router.up:
        return f"router {router.url} · {len(router.backends)} routed"
    return f"router: {router.problem}"


def run_dashboard() -> None:
    DashboardApp(Sources.live()).run()
