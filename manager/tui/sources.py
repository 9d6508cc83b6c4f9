"""Everything the dashboard reads, bundled so tests can hand in fixed readings instead."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from manager.models.store import ModelStore
from manager.readiness.report import ReadinessReport
from manager.readiness.start import check_for_start
from manager.state.paths import StatePaths
from manager.tui.feed import EngineFeed, LiveFeed
from manager.tui.hardware import HardwareProbe, LiveHardware

METRICS_INTERVAL_S = 1.0
HARDWARE_INTERVAL_S = 2.0


@dataclass(frozen=True)
class Sources:
    paths: StatePaths  # where start/stop/restart act
    store: ModelStore  # the catalog's and the picker's local models
    feed: EngineFeed
    hardware: HardwareProbe
    readiness: Callable[[], ReadinessReport]  # the machine's readiness (slow: run in a thread)
    clock: Callable[[], float]  # unix seconds, for uptimes
    metrics_interval_s: float | None = METRICS_INTERVAL_S  # None: only on demand (tests)
    hardware_interval_s: float | None = HARDWARE_INTERVAL_S

    @classmethod
    def live(cls) -> Sources:
        paths = StatePaths.from_env()
        store = ModelStore.from_env()
        return cls(
            paths=paths,
            store=store,
            feed=LiveFeed(paths, store),
            hardware=LiveHardware(),
            readiness=lambda: check_for_start(None, None, "auto", None, None),
            clock=time.time,
        )
