"""`gomgr start / restart / stop / apply` as clients of the supervisor's engine API
(manager/supervisor/engine_api.py): the supervisor runs them, so it stays the one writer of
engine records; this side starts it if none runs, shows the progress it streams, and turns its
answer back into what the commands print, or the LifecycleError they exit with.
"""

from __future__ import annotations

import http.client
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from manager.lifecycle.errors import EngineNotFound, LifecycleError, RouterUnavailable
from manager.lifecycle.router_link import VERIFY_TLS, RouterLink, error_text
from manager.lifecycle.start_request import Started, StartRequest
from manager.lifecycle.stop import stop_engines
from manager.models.progress import Progress
from manager.state.paths import StatePaths
from manager.state.records import RecordStore
from manager.supervisor.engine_messages import (
    ENGINE_EVENT,
    ENGINE_NOT_FOUND,
    AnnounceEvent,
    AppliedEvent,
    ApplyBody,
    FailedEvent,
    OutcomeEvent,
    RestartBody,
    StartBody,
    StartedEvent,
    StepEvent,
    StoppedEngine,
    StoppedOut,
    TransferredEvent,
)

STOP_TIMEOUT_S = 120.0  # every engine's SIGTERM grace, several engines in turn


@dataclass(frozen=True)
class EngineClient:
    paths: StatePaths
    link: RouterLink

    @classmethod
    def from_paths(cls, paths: StatePaths) -> EngineClient:
        return cls(paths, RouterLink.from_paths(paths))

    def start(
        self, request: StartRequest, progress: Progress, announce: Callable[[str], None],
        keep_alive: str | None = None,
    ) -> Started:
        body = StartBody.of(request, keep_alive)
        return self._started(self._events("/engines", body.model_dump_json(), progress, announce))

    def follow_boot_start(self, progress: Progress, announce: Callable[[str], None]) -> Started:
        """Follow the start handed to the supervisor as this command booted it
        (manager/supervisor/boot_start.py), as `start` follows its own."""
        return self._started(self._events("/boot-start", "", progress, announce))

    def apply(
        self, file: Path, timeout_s: float, progress: Progress,
        say: Callable[[str], None], complain: Callable[[str], None],
    ) -> int:
        """Apply the desired-state `file` through the supervisor: the plan and what each start
        says go to `say`, each outcome as it is done (failures and their details to
        `complain`); the exit code."""
        body = ApplyBody(file=str(file.resolve()), timeout_s=timeout_s)

        def outcome(event: OutcomeEvent) -> None:
            (complain if event.failed else say)(event.text)
            if event.details:
                complain(event.details)

        final = self._events("/apply", body.model_dump_json(), progress, say, outcome)
        assert isinstance(final, AppliedEvent)
        return final.exit_code

    def restart(
        self, target: str, progress: Progress, announce: Callable[[str], None], timeout_s: float
    ) -> Started:
        body = RestartBody(timeout_s=timeout_s)
        path = f"/engines/{target}/restart"
        return self._started(self._events(path, body.model_dump_json(), progress, announce))

    def stop(self, target: str | None) -> tuple[StoppedEngine, ...]:
        """Stop the engines `target` names, or all of them; the ones stopped."""
        if not self.link.is_up():
            # NOTE: no owner runs, so nothing else writes the records: stop them here.
            stopped = stop_engines(self.paths, target)
            return tuple(StoppedEngine.of(r) for r in stopped)
        path = "/engines" if target is None else f"/engines/{target}"
        reply = self._request("DELETE", path, timeout=STOP_TIMEOUT_S)
        if reply.status_code != 200:
            raise _refused(reply.status_code, reply.content)
        return StoppedOut.model_validate_json(reply.content).stopped

    def follow_start(
        self, sent: http.client.HTTPConnection, progress: Progress, announce: Callable[[str], None]
    ) -> Started:
        """Follow a start already posted on `sent` (manager/cli/early_start.py), as `start`
        follows its own."""
        return self._started(self._follow(sent, progress, announce))

    def _events(
        self, path: str, body: str, progress: Progress, announce: Callable[[str], None],
        outcome: Callable[[OutcomeEvent], None] = lambda _event: None,
    ) -> StartedEvent | AppliedEvent:
        """Post `body` and follow the events it streams back (see `_follow`)."""
        self.link.ensure()
        try:
            sent = self.link.send_admin(path, body)
        except OSError as exc:
            raise RouterUnavailable(f"the supervisor at {self.link.url} did not answer: {exc}") from exc
        return self._follow(sent, progress, announce, outcome)

    def _follow(
        self, sent: http.client.HTTPConnection, progress: Progress, announce: Callable[[str], None],
        outcome: Callable[[OutcomeEvent], None] = lambda _event: None,
    ) -> StartedEvent | AppliedEvent:
        """The events streamed back on `sent`, followed to the last one; a `failed` one is
        raised as the LifecycleError it was. Closing the stream (Ctrl-C) makes the supervisor
        undo the start."""
        try:
            reply = sent.getresponse()
            if reply.status != 200:
                raise _refused(reply.status, reply.read())
            for line in reply:
                if not line.strip():
                    continue
                event = ENGINE_EVENT.validate_json(line)
                if isinstance(event, StepEvent):
                    progress.step(event.text)
                elif isinstance(event, TransferredEvent):
                    progress.transferred(event.done, event.total)
                elif isinstance(event, AnnounceEvent):
                    announce(event.text)
                elif isinstance(event, OutcomeEvent):
                    outcome(event)
                elif isinstance(event, FailedEvent):
                    raise _failed(event)
                else:
                    return event
        except (OSError, http.client.HTTPException) as exc:
            raise RouterUnavailable(f"the supervisor at {self.link.url} went away: {exc}") from exc
        finally:
            sent.close()
        raise RouterUnavailable(
            f"the supervisor at {self.link.url} ended the start without an answer; "
            f"see its log in {self.paths.router_dir}"
        )

    def _started(self, event: StartedEvent | AppliedEvent) -> Started:
        assert isinstance(event, StartedEvent)
        record = RecordStore(self.paths).get(event.engine_id)
        if record is None:
            raise RouterUnavailable(
                f"engine {event.engine_id} started, but its record is not in {self.paths.root}: "
                "the supervisor on this port serves another state directory"
            )
        return Started(record, event.router_url, event.runtime_reason)

    def _request(self, method: str, path: str, timeout: float) -> httpx.Response:
        try:
            return httpx.request(
                method, f"{self.link.url}/admin{path}", headers=self.link.admin_headers(),
                timeout=timeout, verify=VERIFY_TLS,
            )
        except httpx.TransportError as exc:
            raise RouterUnavailable(f"the supervisor at {self.link.url} did not answer: {exc}") from exc


def _failed(event: FailedEvent) -> LifecycleError:
    error = LifecycleError(event.message, event.details)
    error.exit_code = event.exit_code
    return error


def _refused(status: int, content: bytes) -> LifecycleError:
    message = error_text(status, content)
    if status == 404 and ENGINE_NOT_FOUND.encode() in content:
        return EngineNotFound(message)
    if status == 404:
        return RouterUnavailable(
            "the router on this port has no engine API: it is not gomgr's supervisor; stop it "
            "(gomgr router stop) and run the command again"
        )
    return RouterUnavailable(f"the supervisor refused: {message}")
