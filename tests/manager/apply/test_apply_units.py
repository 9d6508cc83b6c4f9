"""Desired-state parsing, the apply plan, backoff, idle clocks and the watch status; no engine."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.server.metrics import EngineMetrics
from manager.lifecycle.apply_plan import Step, plan_apply
from manager.lifecycle.backoff import Backoff, BackoffPolicy
from manager.lifecycle.desired_state import (
    DesiredEngine,
    DesiredState,
    DesiredStateError,
    load_desired_state,
    parse_duration,
)
from manager.lifecycle.idle import Activity, IdleClock, parse_activity
from manager.lifecycle.watch_status import (
    WaitingEntry,
    WatchStatus,
    process_create_time,
    read_status,
    waiting_rows,
    write_status,
)
from manager.runtimes.base import EngineHandle, EngineSpec
from manager.state.machine import EngineState
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord
from tests.manager.conftest import GOMGR

REPO = "HuggingFaceTB/SmolLM2-135M-Instruct"


def _entry(key: str = "smollm2", **changes: object) -> DesiredEngine:
    fields: dict[str, object] = {
        "key": key, "repo": REPO, "served_name": key, "aliases": (), "runtime": "auto",
        "port": None, "variant": None, "idle_unload_after_s": None,
    } | changes  # fmt: skip
    return DesiredEngine(**fields)  # type: ignore[arg-type]


def _record(engine_id: str, served_name: str, owner: DesiredEngine | None = None) -> EngineRecord:
    spec = EngineSpec(
        id=engine_id, repo=REPO, model_dir=Path("/m"), served_name=served_name, port=31000
    )
    handle = EngineHandle(
        spec=spec, runtime="process", pid=1, create_time=0.0, log_path=Path("/l"),
        started_at=time.time(),
    )  # fmt: skip
    return EngineRecord(handle, EngineState.READY, owner.labels() if owner else {})


def _plan(entries: list[DesiredEngine], live: list[EngineRecord]) -> list[tuple[Step, str]]:
    plan = plan_apply(DesiredState(Path("engines.yaml"), tuple(entries)), live)
    return [(a.step, a.record.id if a.record else a.key) for a in plan.actions]


def test_plan_starts_missing_keeps_matching_and_stops_what_left_the_file() -> None:
    kept, gone = _entry("a"), _entry("b")
    live = [_record("a-1", "a", kept), _record("b-1", "b", gone)]
    assert _plan([kept, _entry("c")], live) == [
        (Step.STOP, "b-1"),
        (Step.START, "c"),
        (Step.KEEP, "a-1"),
    ]


def test_a_changed_spec_restarts_and_idle_unload_after_does_not() -> None:
    old = _entry("a")
    live = [_record("a-1", "a", old)]
    assert _plan([_entry("a", aliases=("x",))], live) == [(Step.RESTART, "a-1")]
    assert _plan([_entry("a", idle_unload_after_s=60.0)], live) == [(Step.KEEP, "a-1")]


def test_engines_started_by_hand_are_left_alone_unless_the_file_names_them() -> None:
    hand = _record("h-1", "other")
    assert _plan([], [hand]) == []
    assert _plan([_entry("other")], [hand]) == [(Step.ADOPT, "h-1")]
    assert _plan([_entry("other", port=4242)], [hand]) == [(Step.RESTART, "h-1")]


def test_a_second_engine_for_one_entry_is_stopped() -> None:
    entry = _entry("a")
    assert _plan([entry], [_record("a-1", "a", entry), _record("a-2", "a", entry)]) == [
        (Step.STOP, "a-2"),
        (Step.KEEP, "a-1"),
    ]


def test_plan_lines_say_nothing_to_do_when_all_is_kept() -> None:
    entry = _entry("a")
    plan = plan_apply(DesiredState(Path("f"), (entry,)), [_record("a-1", "a", entry)])
    assert plan.lines() == ["nothing to do (1 engine up to date)"]


def test_backoff_doubles_to_a_cap_and_resets_after_staying_up() -> None:
    policy = BackoffPolicy(first_s=1, cap_s=10, reset_after_s=30)
    assert [policy.delay(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]
    backoff = Backoff(policy)
    for _ in range(3):
        backoff = backoff.failed(100.0)
    assert (backoff.failures, backoff.retry_at, backoff.due(103.9), backoff.due(104.0)) == (
        3, 104.0, False, True,
    )  # fmt: skip
    assert backoff.started(110.0).failed(120.0).failures == 4  # up 10 s: not yet stable
    assert backoff.started(110.0).failed(140.0).failures == 1  # up 30 s: counts as the first


@pytest.mark.parametrize(
    ("text", "seconds"), [("10m", 600), ("1h30m", 5400), ("2s", 2), ("500ms", 0.5), (45, 45)]
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_a_valid_file_resolves_paths_next_to_it(tmp_path: Path) -> None:
    path = tmp_path / "engines.yaml"
    path.write_text(
        f"engines:\n  - repo: {REPO}\n    aliases: [small]\n    idle_unload_after: 2s\n"
        "  - path: models/mine\n    name: mine\n    port: 31001\n"
    )
    first, second = load_desired_state(path).engines
    assert (first.key, first.served_name, first.aliases, first.idle_unload_after_s) == (
        REPO, None, ("small",), 2.0,
    )  # fmt: skip
    assert (second.key, second.repo, second.port) == ("mine", str(tmp_path / "models/mine"), 31001)


def test_names_ports_and_variants_are_checked_across_entries(tmp_path: Path) -> None:
    path = tmp_path / "engines.yaml"
    path.write_text(
        "engines:\n  - repo: a/b\n    name: x\n    port: 31000\n"
        "  - repo: c/d\n    aliases: [x]\n    port: 31000\n    variant: no-such-manifest\n"
    )
    with pytest.raises(DesiredStateError) as caught:
        load_desired_state(path)
    problems = [p.removeprefix(f"{path}: ") for p in caught.value.problems]
    assert problems[0] == "engines[1].aliases: 'x' is already served by engines[0]"
    assert problems[1] == "engines[1].port: 31000 is already taken by engines[0]"
    assert problems[2].startswith("engines[1].variant: no manifest named 'no-such-manifest'")


def test_gomgr_apply_names_each_problem_with_its_yaml_path_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "engines.yaml"
    bad.write_text("engines:\n  - repo: a/b\n    runtime: dockr\n    idle_unload_after: soon\n")
    broken = tmp_path / "broken.yaml"
    broken.write_text("engines:\n  - repo: a/b\n   x: [\n")
    env = {**os.environ, "GOMGR_STATE_DIR": str(tmp_path / "state")}
    command = [str(GOMGR), "apply", "-f"]
    results = [
        subprocess.run([*command, str(f)], capture_output=True, text=True, env=env, check=False)
        for f in (bad, broken)
    ]
    assert [r.returncode for r in results] == [2, 2]
    assert results[0].stderr.splitlines() == [
        f"error: {bad}: engines[0].runtime: Input should be 'auto', 'docker' or 'process'",
        (
            f"error: {bad}: engines[0].idle_unload_after: 'soon' is not a duration like '10m', "
            "'30s', '1h30m' or '500ms'"
        ),
    ]
    assert results[1].stderr.startswith(f"error: {broken}:3:4: not valid YAML:")
    assert not (tmp_path / "state").exists()


def test_idle_clock_reads_the_engines_own_metrics() -> None:
    metrics = EngineMetrics("m")
    before = parse_activity(metrics.render().decode())
    metrics.num_requests.inc()
    after = parse_activity(metrics.render().decode())
    assert before == Activity(0.0, False) and after == Activity(1.0, False)
    metrics.running.set(1)
    assert parse_activity(metrics.render().decode()) == Activity(1.0, True)
    assert parse_activity("# no engine metrics here\n") is None

    clock = IdleClock(0.0).observe(before, 0.0)
    assert clock.observe(before, 5.0).idle_s(5.0) == 5.0  # nothing served in between
    assert clock.observe(after, 5.0).idle_s(6.0) == 1.0  # a request finished
    assert clock.observe(Activity(0.0, True), 5.0).idle_s(5.0) == 0.0  # one runs now
    assert clock.observe(None, 5.0).idle_s(5.0) == 0.0  # blind: never idle


def test_watch_status_is_read_only_while_its_process_runs(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as child:
        waiting = (WaitingEntry("a", "backoff", 104.0, 3), WaitingEntry("b", "unloaded", None, 0))
        write_status(paths, WatchStatus(child.pid, process_create_time(child.pid), "f", waiting))
        assert read_status(paths) is not None
        rows = waiting_rows(paths, 100.0)
        assert [(r["served_name"], r["state"], r["retry_in_s"]) for r in rows] == [
            ("a", "backoff", 4.0),
            ("b", "unloaded", None),
        ]
        child.kill()
        child.wait()
    assert read_status(paths) is None and waiting_rows(paths, 100.0) == []


def test_a_second_watch_on_one_state_dir_refuses(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path / "state")
    engines = tmp_path / "engines.yaml"
    engines.write_text("engines: []\n")
    env = {**os.environ, "GOMGR_STATE_DIR": str(paths.root)}
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as child:
        write_status(paths, WatchStatus(child.pid, process_create_time(child.pid), "other", ()))
        result = subprocess.run(
            [str(GOMGR), "apply", "-f", str(engines), "--watch"],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        child.kill()
        child.wait()
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"error: another `gomgr apply --watch` (pid {child.pid}, file other)"
    )
