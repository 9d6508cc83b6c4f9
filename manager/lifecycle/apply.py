"""Carry out an apply plan: stop, restart, adopt and start engines, one action at a time."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from manager.lifecycle.apply_plan import Action, Plan, Step, plan_apply
from manager.lifecycle.desired_state import DesiredEngine, DesiredState
from manager.lifecycle.errors import LifecycleError
from manager.lifecycle.reconcile import reconcile
from manager.lifecycle.replicas import replica_port
from manager.lifecycle.router_link import RouterLink
from manager.lifecycle.start import start_engine
from manager.lifecycle.start_request import StartRequest
from manager.lifecycle.stop import stop_record
from manager.models.errors import ModelError
from manager.models.progress import Progress
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord, RecordStore

_DONE = {Step.START: "started", Step.RESTART: "restarted", Step.ADOPT: "adopted", Step.KEEP: "kept"}


@dataclass(frozen=True)
class Failure:
    message: str
    details: str  # e.g. the engine's last log lines
    exit_code: int


@dataclass(frozen=True)
class Outcome:
    action: Action
    record: EngineRecord | None  # the engine that serves the entry now; None after a stop
    failure: Failure | None = None

    def describe(self) -> str:
        key = self.action.target
        if self.failure is not None:
            return f"failed to {self.action.step} {key}: {self.failure.message}"
        if self.record is None:
            assert self.action.record is not None  # NOTE: only a stop leaves no engine
            return f"stopped {key} (engine {self.action.record.id})"
        port = self.record.handle.spec.port
        return f"{_DONE[self.action.step]} {key} (engine {self.record.id}, port {port})"


@dataclass(frozen=True)
class Applier:
    paths: StatePaths
    router: RouterLink
    progress: Progress
    announce: Callable[[str], None]  # the runtime line of each start
    timeout_s: float  # for each engine's /health

    def plan(self, desired: DesiredState) -> Plan:
        """The plan against the engines that run now (dead ones are cleaned up first)."""
        return plan_apply(desired, reconcile(self.paths, self.router).live)

    def execute(self, plan: Plan) -> list[Outcome]:
        return [self.run(action) for action in plan.changes]

    def run(self, action: Action) -> Outcome:
        """Carry out one action; a failure is returned, so the other actions still run."""
        try:
            return Outcome(action, self._run(action))
        except LifecycleError as exc:
            return Outcome(action, None, Failure(exc.message, exc.details, exc.exit_code))
        except ModelError as exc:
            return Outcome(action, None, Failure(exc.message, "", 1))

    def _run(self, action: Action) -> EngineRecord | None:
        if action.step is Step.KEEP:
            return action.record
        if action.record is not None and action.step in (Step.STOP, Step.RESTART):
            stop_record(action.record, self.paths, self.router)
        if action.step is Step.STOP:
            return None
        assert action.entry is not None
        if action.step is Step.ADOPT:
            assert action.record is not None
            adopted = dataclasses.replace(
                action.record,
                labels={**action.record.labels, **action.entry.labels(action.replica)},
            )
            RecordStore(self.paths).save(adopted)
            return adopted
        return self._start(action.entry, action.replica)

    def _start(self, entry: DesiredEngine, replica: int) -> EngineRecord:
        request = StartRequest(
            repo=entry.repo, runtime=entry.runtime, port=replica_port(entry.port, replica),
            served_name=entry.served_name, timeout_s=self.timeout_s, aliases=entry.aliases,
            variant=entry.variant, labels=entry.labels(replica), replica=replica,
            replicas=entry.replicas,
        )  # fmt: skip
        return start_engine(request, self.paths, self.progress, self.announce).record
