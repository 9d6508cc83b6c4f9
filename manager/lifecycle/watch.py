"""`gomgr apply --watch`: the reconcile loop and crash watcher.

Each tick (1 s by default):
1. re-read the file if it changed (an invalid edit is reported and the last good file kept;
   an edit counts as an apply, so it also brings unloaded engines back);
2. reconcile: a record whose engine died is removed and its route deregistered;
3. an apply-owned engine that was running at the last tick and is gone now (crashed,
   killed, or stopped by hand) is started again after a backoff: 1 s, 2 s, 4 s ... capped,
   reset once it stayed up a while;
4. an engine with idle_unload_after that served no request for that long is stopped, and
   stays stopped until the next apply (start-on-demand in the router does not exist);
5. the apply plan for what remains is carried out.

NOTE: starts run one at a time inside the tick, so while one engine starts (seconds to
minutes) the loop does not look at the others; the router's own health monitor still drops
a dead engine's route at once.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from manager.lifecycle.apply import Applier, Outcome
from manager.lifecycle.apply_plan import Step, owner_of, plan_apply, replica_of
from manager.lifecycle.backoff import Backoff, BackoffPolicy
from manager.lifecycle.desired_state import DesiredState, DesiredStateError, load_desired_state
from manager.lifecycle.errors import LifecycleError
from manager.lifecycle.idle import IdleClock, scrape_activity
from manager.lifecycle.reconcile import reconcile
from manager.lifecycle.stop import stop_record
from manager.lifecycle.watch_status import (
    WaitingEntry,
    WatchStatus,
    clear_status,
    process_create_time,
    read_status,
    write_status,
)
from manager.state.machine import EngineState
from manager.state.records import EngineRecord, RecordStore


class WatchConflict(LifecycleError):
    exit_code = 2


@dataclass(frozen=True)
class WatchSettings:
    interval_s: float = 1.0
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)


class Watcher:
    """The loop's memory between ticks; everything durable is in the records."""

    def __init__(
        self, desired: DesiredState, applier: Applier, settings: WatchSettings,
        say: Callable[[str], None],
    ) -> None:  # fmt: skip
        self.desired = desired
        self.applier = applier
        self.settings = settings
        self.say = say
        self._mtime = _mtime(desired.source)
        self._backoff: dict[str, Backoff] = {}
        # NOTE: (entry key, replica) → the engine id running at the last tick's end
        self._seen: dict[tuple[str, int], str] = {}
        self._idle: dict[str, IdleClock] = {}  # engine id → its idle clock
        self._blind: set[str] = set()  # engine ids without /metrics (told once)
        self._unloaded: set[str] = set()  # entry keys stopped for idleness
        self._status: WatchStatus | None = None
        self._create_time = process_create_time(os.getpid())

    def run(self) -> None:
        """Tick until Ctrl-C or SIGTERM; the engines keep running after it."""
        paths = self.applier.paths
        pid = os.getpid()
        other = read_status(paths)
        if other is not None and other.pid != pid:
            raise WatchConflict(
                f"another `gomgr apply --watch` (pid {other.pid}, file {other.source}) watches "
                f"{paths.root}; stop it first"
            )
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            self._publish(time.time())
            self._tick(first=True)
            self.say(
                f"watching {self.desired.source} every {self.settings.interval_s:g}s; "
                "Ctrl-C stops watching, the engines keep running"
            )
            while True:
                time.sleep(self.settings.interval_s)
                self._tick(first=False)
        except KeyboardInterrupt:
            self.say("stopped watching; the engines keep running")
        finally:
            signal.signal(signal.SIGTERM, previous)
            clear_status(paths, pid)

    def _tick(self, first: bool) -> None:
        """One tick; a router that does not answer is reported and tried again next tick."""
        try:
            self.tick(time.time(), first)
        except LifecycleError as exc:
            self.say(f"error: {exc.message}; trying again in {self.settings.interval_s:g}s")

    def tick(self, now: float, first: bool = False) -> None:
        self._reload()
        router = self.applier.router
        if self.desired.engines:
            router.ensure()  # NOTE: a router that died is started again; reconcile re-registers
        live = list(reconcile(self.applier.paths, router).live)
        self._note_gone(live, now)
        live = self._unload_idle(live, now)
        plan = plan_apply(self.desired, live)
        if first and not plan.changes:
            self.say(plan.lines()[0])
        for action in plan.changes:
            starts = action.step in (Step.START, Step.RESTART)
            if action.step is Step.START and not self._may_start(action.key, now):
                continue
            self.say(action.describe())
            self._report(self.applier.run(action), starts)
        owned = [r for r in RecordStore(self.applier.paths).all() if owner_of(r) is not None]
        self._seen = {(str(owner_of(r)), replica_of(r)): r.id for r in owned}
        self._unloaded -= {key for key, _ in self._seen}
        self._publish(now)

    def _reload(self) -> None:
        mtime = _mtime(self.desired.source)
        if mtime == self._mtime:
            return
        self._mtime = mtime
        try:
            self.desired = load_desired_state(self.desired.source)
        except DesiredStateError as exc:
            for problem in exc.problems:
                self.say(f"error: {problem} (keeping the last valid file)")
            return
        self.say(f"{self.desired.source} changed; applying it")
        self._unloaded.clear()

    def _note_gone(self, live: list[EngineRecord], now: float) -> None:
        running = {r.id for r in live}
        # NOTE: per replica: one replica of an entry that died is backed off even while the
        # entry's other replicas run
        managed = {(owner_of(r), replica_of(r)) for r in live}
        for (key, replica), engine_id in self._seen.items():
            if engine_id in running or (key, replica) in managed or self.desired.get(key) is None:
                continue
            backoff = self._backoff.get(key, Backoff(self.settings.backoff)).failed(now)
            self._backoff[key] = backoff
            self._idle.pop(engine_id, None)
            self.say(
                f"engine {engine_id} ({key}) is gone; its route and record are removed; "
                f"starting it again in {backoff.wait_s(now):.0f}s"
            )

    def _unload_idle(self, live: list[EngineRecord], now: float) -> list[EngineRecord]:
        kept = []
        for record in live:
            key = owner_of(record)
            entry = self.desired.get(key) if key is not None else None
            ttl = entry.idle_unload_after_s if entry is not None else None
            if key is None or ttl is None or record.state is not EngineState.READY:
                kept.append(record)
                continue
            activity = scrape_activity(record.handle.spec.base_url, record.handle.spec.auth_headers)
            if activity is None and record.id not in self._blind:
                self._blind.add(record.id)
                self.say(f"cannot see the requests of {key} (no /metrics); it is not unloaded")
            clock = self._idle.get(record.id, IdleClock(now)).observe(activity, now)
            self._idle[record.id] = clock
            if clock.idle_s(now) < ttl:
                kept.append(record)
                continue
            stop_record(record, self.applier.paths, self.applier.router)
            self._idle.pop(record.id)
            self._unloaded.add(key)
            self.say(
                f"unloaded {key} (engine {record.id}): no request for {ttl:g}s; "
                "it comes back on the next apply"
            )
        return kept

    def _may_start(self, key: str, now: float) -> bool:
        backoff = self._backoff.get(key)
        return key not in self._unloaded and (backoff is None or backoff.due(now))

    def _report(self, outcome: Outcome, starts: bool) -> None:
        self.say(outcome.describe())
        if outcome.failure is not None and outcome.failure.details:
            self.say(outcome.failure.details)
        if not starts:
            return
        key, now = outcome.action.key, time.time()
        backoff = self._backoff.get(key, Backoff(self.settings.backoff))
        if outcome.failure is None:
            self._backoff[key] = backoff.started(now)
            return
        self._backoff[key] = backoff = backoff.failed(now)
        self.say(f"trying {key} again in {backoff.wait_s(now):.0f}s")

    def _publish(self, now: float) -> None:
        waiting = []
        for entry in self.desired.engines:
            backoff = self._backoff.get(entry.key)
            failures = backoff.failures if backoff is not None else 0
            if any(key == entry.key for key, _ in self._seen):
                continue
            if entry.key in self._unloaded:
                waiting.append(WaitingEntry(entry.key, "unloaded", None, failures))
            elif backoff is not None and not backoff.due(now):
                waiting.append(WaitingEntry(entry.key, "backoff", backoff.retry_at, failures))
        status = WatchStatus(
            os.getpid(), self._create_time, str(self.desired.source), tuple(waiting)
        )
        if status != self._status:
            write_status(self.applier.paths, status)
            self._status = status


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt
