"""The start a cold `gomgr start` hands the supervisor it boots, begun before the router imports.

With no supervisor running, `gomgr start` starts one with its start request in
$GOMGR_BOOT_START (a StartBody's JSON; manager/lifecycle/router_link.py). The supervisor owns
its port, reconciles the records, and begins that start on a thread of its own
(manager/supervisor/boot.py) before it imports the router's web stack, which then imports
while the engine starts instead of before it. It is the same `start_engine` as any start;
the CLI follows it at POST /admin/boot-start (manager/supervisor/engine_api.py) with the
events it emitted so far first, as it would follow its own POST /admin/engines.

A CLI that goes away cancels it, and the start undoes what it began: the supervisor's
parent changing (the CLI that started it exited) or, once followed, the stream's end.
"""

from __future__ import annotations

import os
import threading

from pydantic import ValidationError

from manager.lifecycle.start import start_engine
from manager.lifecycle.start_request import Started, StartRequest
from manager.state.paths import StatePaths
from manager.supervisor.engine_messages import EngineEvent, StartBody
from manager.supervisor.engines import requested_start
from manager.supervisor.event_stream import Cancelled, Emit, EmittingProgress, announcer
from router.errors import RouterError

# NOTE: how often a follower's stream is checked for its client's going away.
FOLLOW_POLL_S = 0.05
# NOTE: how long the boot waits for the engine to be spawned before it imports the web stack,
# which would take the GIL from the planning; a start that downloads its model first takes
# longer, and the router then boots while it downloads (the CLI waits 30 s for the router).
SPAWN_WAIT_S = 10.0


class BootStart:
    def __init__(self, request: StartRequest, keep_alive_s: float | None, paths: StatePaths) -> None:
        self.keep_alive_s = keep_alive_s
        self._request = request
        self._paths = paths
        self._parent = os.getppid()
        self._lock = threading.Lock()
        self._early: list[EngineEvent] = []  # emitted before anyone followed
        self._sink: Emit | None = None
        self._claimed = False
        self._cancel = threading.Event()
        self._spawned = threading.Event()  # the engine runs, or the start ended without one
        self._done = threading.Event()
        self._started: Started | None = None
        self._error: BaseException | None = None
        # NOTE: not a daemon thread: a supervisor that ends mid-start cancels it and waits
        # for its undo (`cancel`), so no engine outlives it unrecorded.
        self._thread = threading.Thread(target=self._run, name="boot-start")

    @classmethod
    def begin(cls, body_json: str, paths: StatePaths) -> BootStart:
        """The start `body_json` asks for, begun; SystemExit with one line if it does not parse
        (the CLI sent it, so only a mismatched install gets there)."""
        try:
            request, keep_alive_s = requested_start(StartBody.model_validate_json(body_json))
        except (ValidationError, RouterError) as exc:
            raise SystemExit(f"error: the start handed to the supervisor is not valid: {exc}") from exc
        boot = cls(request, keep_alive_s, paths)
        boot._thread.start()
        return boot

    def wait_spawned(self) -> None:
        """Until the engine runs or the start ended, at most SPAWN_WAIT_S."""
        self._spawned.wait(SPAWN_WAIT_S)

    def claim(self) -> bool:
        """True for the first caller only: the one follower (the CLI that handed it over)."""
        with self._lock:
            claimed, self._claimed = self._claimed, True
        return not claimed

    def follow(self, emit: Emit, cancelled: Cancelled) -> Started:
        """Every event so far then each as it comes to `emit`, until the start ends: its
        result, or the LifecycleError it failed with. `cancelled` cancels it."""
        with self._lock:
            for event in self._early:
                emit(event)
            self._early.clear()
            self._sink = emit
        while not self._done.wait(FOLLOW_POLL_S):
            if cancelled():
                self._cancel.set()
        if self._error is not None:
            raise self._error
        assert self._started is not None
        return self._started

    def cancel(self) -> None:
        """Cancel the start if it still runs, and wait for it to end (and undo what it began)."""
        self._cancel.set()
        self._thread.join()

    def _emit(self, event: EngineEvent) -> None:
        with self._lock:
            if self._sink is None:
                self._early.append(event)
            else:
                self._sink(event)

    def _cancelled(self) -> bool:
        return self._cancel.is_set() or os.getppid() != self._parent

    def _run(self) -> None:
        try:
            self._started = start_engine(
                self._request, self._paths, EmittingProgress(self._emit, self._cancelled),
                announcer(self._emit), self._cancelled, booting=self._spawned,
            )
        except BaseException as exc:  # noqa: BLE001 - the follower gets it, as a start's error
            self._error = exc
        finally:
            self._spawned.set()
            self._done.set()
