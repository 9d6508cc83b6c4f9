"""The engine state machine: stopped → starting → ready → stopping (→ failed)."""

from __future__ import annotations

from enum import StrEnum


class EngineState(StrEnum):
    STOPPED = "stopped"  # no process; a record never stays in this state (it is removed)
    STARTING = "starting"  # process launched, /health not yet 200
    READY = "ready"  # /health 200 and registered with the router
    STOPPING = "stopping"  # deregistered, process being ended
    FAILED = "failed"  # the process exited or never became healthy


_ALLOWED: dict[EngineState, frozenset[EngineState]] = {
    EngineState.STOPPED: frozenset({EngineState.STARTING}),
    EngineState.STARTING: frozenset({EngineState.READY, EngineState.STOPPING, EngineState.FAILED}),
    EngineState.READY: frozenset({EngineState.STOPPING, EngineState.FAILED}),
    EngineState.STOPPING: frozenset({EngineState.STOPPED, EngineState.FAILED}),
    EngineState.FAILED: frozenset({EngineState.STOPPING, EngineState.STOPPED}),
}


class InvalidTransition(Exception):
    def __init__(self, current: EngineState, new: EngineState) -> None:
        super().__init__(f"engine state {current} cannot become {new}")


def transition(current: EngineState, new: EngineState) -> EngineState:
    """`new` if the machine allows current → new, else InvalidTransition."""
    if new not in _ALLOWED[current]:
        raise InvalidTransition(current, new)
    return new
