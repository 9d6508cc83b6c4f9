"""`gomgr apply -f FILE` run by the supervisor: `POST /admin/apply` (ApplyBody) streams the
plan, each start's progress and each action's outcome; once applied, the file's entries join
the catalog (listed, and loaded on their first request, whether running or not) and the file
is remembered for the supervisor's next start.

NOTE: `gomgr apply --watch` still runs in its own process (manager/lifecycle/watch.py).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from starlette.responses import StreamingResponse

from manager.lifecycle.apply import Applier
from manager.lifecycle.desired_state import DesiredState, load_desired_state
from manager.lifecycle.router_link import RouterLink
from manager.state.paths import StatePaths
from manager.supervisor.applied_state import remember
from manager.supervisor.engine_messages import (
    AnnounceEvent,
    AppliedEvent,
    ApplyBody,
    EngineEvent,
    OutcomeEvent,
)
from manager.supervisor.event_stream import (
    Cancelled,
    Emit,
    EmittingProgress,
    announcer,
    stream_events,
)
from manager.supervisor.supervisor import Supervisor


def apply_routes(supervisor: Supervisor, paths: StatePaths) -> APIRouter:
    routes = APIRouter()

    @routes.post("/apply")
    async def apply(body: ApplyBody) -> StreamingResponse:
        def work(emit: Emit, cancelled: Cancelled) -> tuple[DesiredState, int]:
            desired = load_desired_state(Path(body.file))
            progress = EmittingProgress(emit, cancelled)
            applier = Applier(paths, RouterLink.from_paths(paths), progress, announcer(emit), body.timeout_s)
            plan = applier.plan(desired)
            for line in plan.lines():
                emit(AnnounceEvent(text=line))
            exit_code = 0
            for outcome in applier.execute(plan):
                failure = outcome.failure
                emit(OutcomeEvent(
                    text=outcome.describe(), failed=failure is not None,
                    details=failure.details if failure else "",
                ))
                if failure is not None and exit_code == 0:
                    exit_code = failure.exit_code
            return desired, exit_code

        def finish(applied: tuple[DesiredState, int], _emit: Emit) -> EngineEvent:
            desired, exit_code = applied
            supervisor.desire(desired)
            remember(paths, desired)
            return AppliedEvent(exit_code=exit_code)

        return stream_events(work, finish)

    return routes
