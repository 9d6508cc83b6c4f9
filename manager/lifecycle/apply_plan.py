"""The diff between a desired-state file and the engines that run: what `gomgr apply` will do.

Ownership: an engine `gomgr apply` started (or adopted) carries the entry's key and spec hash
in its record's labels. Apply stops only such engines when their entry leaves the file.
An engine started by hand (`gomgr start`) is never touched, unless it serves a name the
file declares: then the file manages that name, so the engine is adopted when it matches
the entry, and replaced when it does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from manager.lifecycle.desired_state import (
    ENTRY_LABEL,
    REPLICA_LABEL,
    SPEC_LABEL,
    DesiredEngine,
    DesiredState,
)
from manager.state.records import EngineRecord


class Step(StrEnum):
    STOP = "stop"
    RESTART = "restart"
    ADOPT = "adopt"
    START = "start"
    KEEP = "keep"


_ORDER = list(Step)  # NOTE: stops first, so a restarted or new engine finds its port free


@dataclass(frozen=True)
class Action:
    step: Step
    key: str
    reason: str
    entry: DesiredEngine | None = None  # None for STOP
    record: EngineRecord | None = None  # None for START
    replica: int = 0  # which of the entry's replicas (0-based)

    @property
    def target(self) -> str:
        return self.key if not self.replica else f"{self.key} replica {self.replica + 1}"

    def describe(self) -> str:
        target = self.target if self.record is None else f"{self.target} (engine {self.record.id})"
        return f"{self.step} {target}: {self.reason}"


@dataclass(frozen=True)
class Plan:
    actions: tuple[Action, ...]

    @property
    def changes(self) -> tuple[Action, ...]:
        return tuple(a for a in self.actions if a.step is not Step.KEEP)

    def lines(self) -> list[str]:
        if not self.changes:
            kept = len(self.actions)
            return [f"nothing to do ({kept} engine{'' if kept == 1 else 's'} up to date)"]
        return [action.describe() for action in self.actions]


def owner_of(record: EngineRecord) -> str | None:
    """The key of the entry that manages the engine; None for an engine started by hand."""
    return record.labels.get(ENTRY_LABEL)


def plan_apply(desired: DesiredState, live: Sequence[EngineRecord]) -> Plan:
    """The actions that make `live` (records, oldest first) match `desired`."""
    owned: dict[str, list[EngineRecord]] = {}
    by_hand: list[EngineRecord] = []
    for record in live:
        key = owner_of(record)
        if key is None:
            by_hand.append(record)
        else:
            owned.setdefault(key, []).append(record)
    actions: list[Action] = []
    for key, records in owned.items():
        if desired.get(key) is None:
            actions += [Action(Step.STOP, key, "no longer in the file", record=r) for r in records]
    for entry in desired.engines:
        actions += _entry_actions(entry, owned.get(entry.key, []), by_hand)
    return Plan(tuple(sorted(actions, key=lambda a: _ORDER.index(a.step))))


def _entry_actions(
    entry: DesiredEngine, mine: list[EngineRecord], by_hand: list[EngineRecord]
) -> list[Action]:
    """Per replica: keep, restart or start it; engines beyond the replica count are stopped."""
    slots: dict[int, EngineRecord] = {}
    actions: list[Action] = []
    for record in mine:
        replica = replica_of(record)
        if replica < entry.replicas and replica not in slots:
            slots[replica] = record
        else:
            actions.append(Action(Step.STOP, entry.key, "beyond the entry's replicas", record=record))
    for replica in range(entry.replicas):
        found = slots.get(replica)
        if found is None and replica == 0:
            actions.append(_by_hand_action(entry, by_hand))
        elif found is None:
            reason = f"{entry.repo} has no replica {replica + 1} running"
            actions.append(Action(Step.START, entry.key, reason, entry, replica=replica))
        elif found.labels.get(SPEC_LABEL) != entry.spec_hash:
            actions.append(Action(Step.RESTART, entry.key, "its spec changed", entry, found, replica))
        else:
            actions.append(Action(Step.KEEP, entry.key, "up to date", entry, found, replica))
    return actions


def _by_hand_action(entry: DesiredEngine, by_hand: list[EngineRecord]) -> Action:
    """The first replica: an engine started by hand that serves the entry's name is adopted
    when it matches the entry, replaced when not."""
    named = [r for r in by_hand if r.handle.spec.served_name == entry.key]
    if not named:
        return Action(Step.START, entry.key, f"{entry.repo} is not running", entry)
    record = named[0]
    if matches(entry, record):
        return Action(Step.ADOPT, entry.key, "started by hand and matches the file", entry, record)
    return Action(Step.RESTART, entry.key, "started by hand with another spec", entry, record)


def replica_of(record: EngineRecord) -> int:
    """Which replica of its entry an engine is; 0 for one labelled before replicas existed."""
    label = record.labels.get(REPLICA_LABEL, "0")
    return int(label) if label.isdigit() else 0


def matches(entry: DesiredEngine, record: EngineRecord) -> bool:
    """Whether an engine started by hand runs what the entry asks for."""
    spec = record.handle.spec
    return (
        spec.repo == entry.repo
        and spec.aliases == entry.aliases
        and entry.variant == record.variant
        and entry.runtime in ("auto", record.handle.runtime)
        and entry.port in (None, spec.port)
    )
