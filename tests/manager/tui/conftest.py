"""Fixtures for the dashboard tests.

Snapshots need readings that never vary, so they get fakes, named as such: a fake engine
feed (fixed records, router view and metrics series), fixed hardware numbers, a fake NVML
probe, a fixed clock. Everything else in the app (join, rendering, banner, log pane reading
a real log file) is the real code. The live tests use none of these.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import MappingProxyType

import pytest

from manager.models.store import ModelStore
from manager.readiness.blocker import EVERY_RUNTIME, Blocker
from manager.readiness.gpu import GpuInfo, GpuProbe, GpuSnapshot
from manager.readiness.report import ReadinessReport
from manager.readiness.start import check_for_start
from manager.runtimes.base import EngineHandle, EngineSpec, Runtime
from manager.runtimes.process import ProcessRuntime
from manager.state.machine import EngineState
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord
from manager.tui.app import DashboardApp
from manager.tui.feed import CatalogModel, EngineFeed, LiveRecord
from manager.tui.hardware import HardwareProbe, HardwareReading, HostReading
from manager.tui.metrics import MetricsSample
from manager.tui.router_view import RoutedBackend, RouterView
from manager.tui.sources import Sources

GIB = 1024**3
FIXED_NOW = 1_750_000_000.0
ROUTER_URL = "http://127.0.0.1:8000"
NO_NVML = "NVML Shared Library Not Found"


class FakeNvmlProbe(GpuProbe):
    """A fake NVML: the GPUs it is given (none: NVML's error on a machine without a driver)."""

    def __init__(self, gpus: tuple[GpuInfo, ...] = ()) -> None:
        self._gpus = gpus

    def snapshot(self) -> GpuSnapshot:
        if not self._gpus:
            return GpuSnapshot((), None, NO_NVML)
        return GpuSnapshot(self._gpus, "570.86", None)


class FixedHardware(HardwareProbe):
    """A fake hardware probe: fixed host numbers, GPUs from a fake NVML probe."""

    def __init__(self, gpus: tuple[GpuInfo, ...] = ()) -> None:
        self._nvml = FakeNvmlProbe(gpus)

    def read(self) -> HardwareReading:
        snapshot = self._nvml.snapshot()
        host = HostReading(
            cpu_percent=37.0, cpu_count=2, ram_used_bytes=5 * GIB, ram_total_bytes=24 * GIB
        )
        return HardwareReading(snapshot.gpus, snapshot.error, host)


class FakeEngineFeed(EngineFeed):
    """A fake feed: fixed records and catalog, one router view (then the stream ends), and a
    fixed series of generated-token counters one second apart."""

    def __init__(
        self,
        records: tuple[LiveRecord, ...],
        router: RouterView,
        counters: tuple[float, ...],
        catalog: tuple[CatalogModel, ...] = (),
    ) -> None:
        self._records = records
        self._catalog = catalog
        self._router = router
        self._counters = counters
        self._calls = 0
        self._runtime = ProcessRuntime(StatePaths(Path("/nonexistent")))

    def records(self) -> tuple[LiveRecord, ...]:
        return self._records

    def catalog(self) -> tuple[CatalogModel, ...]:
        return self._catalog

    def runtime(self, name: str) -> Runtime:
        return self._runtime

    async def router_views(self) -> AsyncIterator[RouterView]:
        yield self._router

    async def sample(self, record: EngineRecord) -> MetricsSample:
        counter = self._counters[min(self._calls, len(self._counters) - 1)]
        self._calls += 1
        return MetricsSample(at=float(self._calls), inflight=2, generated_tokens=counter)


def fixed_record(log_dir: Path, state: EngineState = EngineState.READY) -> EngineRecord:
    log_path = log_dir / "engine.log"
    log_path.write_text(
        "INFO engine: loaded LlamaForCausalLM (30 layers) in 2.1 s\n"
        "INFO engine: KV pool: 118000 tokens\n"
        "INFO server: listening on 127.0.0.1:30123\n"
    )
    spec = EngineSpec(
        id="smollm2-135m-instruct-3f9a1c",
        repo="HuggingFaceTB/SmolLM2-135M-Instruct",
        model_dir=log_dir,
        served_name="HuggingFaceTB/SmolLM2-135M-Instruct",
        port=30123,
    )
    # NOTE: pid 0 is never an engine: the real runtime sees it as gone and follows nothing.
    handle = EngineHandle(
        spec=spec,
        runtime="process",
        pid=0,
        create_time=0.0,
        log_path=log_path,
        started_at=FIXED_NOW - 3725,
    )
    return EngineRecord(handle, state)


def disk_full() -> Blocker:
    return Blocker(
        id="disk-space-low",
        title="Not enough disk space in /home/me/.local/share/gomgr/models",
        explanation="The download needs 0.54 GB plus 1.07 GB to spare, but the filesystem has 0.20 GB free.",
        fix_steps=(
            "Remove models you no longer use: `gomgr models list`, then `gomgr models rm REPO`.",
            "Or point the store at a bigger disk: `export GOMGR_MODELS_DIR=/path/with/room`.",
        ),
        severity="blocks",
        blocks=EVERY_RUNTIME,
    )


MakeDashboard = Callable[..., DashboardApp]


@pytest.fixture
def make_record(tmp_path: Path) -> Callable[[EngineState], EngineRecord]:
    """The fixed engine's record in a given state, its log in tmp_path."""
    return lambda state: fixed_record(tmp_path, state)


@pytest.fixture
def dashboard(tmp_path: Path) -> MakeDashboard:
    """A dashboard over fixed readings: `engines` ready engines (0 or 1), `blocked` adds a
    blocker of every runtime to the (real, process-runtime) readiness report, `catalog` the
    store's models as the router lists them."""

    def make(
        engines: int = 0,
        blocked: bool = False,
        gpus: tuple[GpuInfo, ...] = (),
        catalog: tuple[CatalogModel, ...] = (),
    ) -> DashboardApp:
        store = ModelStore(tmp_path / "store")
        report: ReadinessReport = check_for_start(
            None, None, "process", None, None, gpu_probe=FakeNvmlProbe(gpus), store=store
        )
        if blocked:
            report = dataclasses.replace(report, blockers=(*report.blockers, disk_full()))
        records = tuple(LiveRecord(fixed_record(tmp_path), True) for _ in range(engines))
        backends = {
            r.record.id: RoutedBackend(r.record.id, r.record.handle.spec.served_name, "ready")
            for r in records
        }
        router = RouterView(ROUTER_URL, True, MappingProxyType(backends))
        feed = FakeEngineFeed(
            records, router, counters=(0, 9, 21, 30, 44, 52, 60, 75, 83), catalog=catalog
        )
        sources = Sources(
            paths=StatePaths(tmp_path / "state"),
            store=store,
            feed=feed,
            hardware=FixedHardware(gpus),
            readiness=lambda: report,
            clock=lambda: FIXED_NOW,
            metrics_interval_s=None,
            hardware_interval_s=None,
        )
        return DashboardApp(sources)

    return make
