"""Replicas in the desired-state file and their shares of the machine; no engine."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from manager.lifecycle.apply_plan import Step, plan_apply
from manager.lifecycle.desired_state import DesiredState, DesiredStateError, load_desired_state
from manager.lifecycle.errors import StartBlocked
from manager.lifecycle.replicas import (
    OMP_AFFINITY,
    OMP_THREADS,
    cpu_env,
    cpu_share,
    replica_port,
    replica_share,
)
from manager.lifecycle.restart import restart_request
from manager.state.records import EngineRecord
from tests.manager.apply.test_apply_units import _entry, _record


def _replica(engine_id: str, replicas: int, replica: int) -> EngineRecord:
    entry = _entry("a", replicas=replicas)
    record = _record(engine_id, "a", entry)
    return dataclasses.replace(record, labels=entry.labels(replica))


def _plan(replicas: int, live: list[EngineRecord]) -> list[tuple[Step, str]]:
    desired = DesiredState(Path("engines.yaml"), (_entry("a", replicas=replicas),))
    return [(a.step, a.describe()) for a in plan_apply(desired, live).actions]


def test_the_file_takes_replicas_and_their_port_range(tmp_path: Path) -> None:
    good = tmp_path / "engines.yaml"
    good.write_text("engines:\n  - {repo: org/a, name: a, port: 31000, replicas: 3}\n")
    (engine,) = load_desired_state(good).engines
    assert engine.replicas == 3
    clash = tmp_path / "clash.yaml"
    clash.write_text(
        "engines:\n  - {repo: org/a, name: a, port: 31000, replicas: 3}\n"
        "  - {repo: org/b, name: b, port: 31002}\n"
    )
    with pytest.raises(DesiredStateError) as caught:
        load_desired_state(clash)
    assert "engines[1].port: 31002 is already taken by engines[0]" in caught.value.problems[0]
    bad = tmp_path / "bad.yaml"
    bad.write_text("engines:\n  - {repo: org/a, replicas: 0}\n")
    with pytest.raises(DesiredStateError) as caught:
        load_desired_state(bad)
    assert "engines[0].replicas" in caught.value.problems[0]


def test_plan_starts_each_missing_replica_and_stops_those_beyond_the_count() -> None:
    assert _plan(3, [_replica("a-0", 3, 0)]) == [
        (Step.START, "start a replica 2: HuggingFaceTB/SmolLM2-135M-Instruct has no replica 2 running"),
        (Step.START, "start a replica 3: HuggingFaceTB/SmolLM2-135M-Instruct has no replica 3 running"),
        (Step.KEEP, "keep a (engine a-0): up to date"),
    ]
    # NOTE: the count is not in the spec hash: scaling down keeps the replicas that stay
    live = [_replica("a-0", 3, 0), _replica("a-1", 3, 1), _replica("a-2", 3, 2)]
    assert [step for step, _ in _plan(2, live)] == [Step.STOP, Step.KEEP, Step.KEEP]
    assert "engine a-2" in _plan(2, live)[0][1]


def test_replica_shares_split_gpus_or_cpus() -> None:
    assert replica_port(31000, 2) == 31002 and replica_port(None, 2) is None
    assert replica_share("0,1,2,3", 1, 2, gpus_seen=0).gpus == "2,3"
    assert replica_share("auto", 2, 3, gpus_seen=3) == replica_share("2", 0, 1, 0)
    with pytest.raises(StartBlocked, match="3 replicas need at least 3 GPUs"):
        replica_share("0,1", 0, 3, gpus_seen=8)
    cpu = replica_share("auto", 0, 2, gpus_seen=0)
    assert dict(cpu.env)[OMP_THREADS] == str(len(dict(cpu.env)[OMP_AFFINITY].split()))
    assert cpu_share([0, 1, 2, 3], 1, 2) == (2, 3)
    assert [cpu_share([0, 1], i, 3) for i in range(3)] == [(0,), (1,), (0,)]
    assert replica_share("auto", 0, 1, gpus_seen=0).env == ()


def test_a_restarted_replica_keeps_its_cpu_share() -> None:
    record = _replica("a-1", 2, 1)
    spec = dataclasses.replace(record.handle.spec, env=(("X", "1"), *cpu_env((2, 3))))
    shared = dataclasses.replace(record, handle=dataclasses.replace(record.handle, spec=spec))
    request = restart_request(shared)
    assert request.cpus == (2, 3) and request.labels == shared.labels
    assert restart_request(_replica("a-0", 2, 0)).cpus == ()
