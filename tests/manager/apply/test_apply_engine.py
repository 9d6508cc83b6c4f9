"""`gomgr apply` with real SmolLM2 engines, the process runtime and a background router.

Tests run in file order and share three engine starts: one by hand (`gomgr start`), one by
apply, one by the watch loop after a `kill -9`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from openai import OpenAI

from manager.lifecycle.desired_state import ENTRY_LABEL
from manager.lifecycle.watch_status import status_path
from manager.state.records import EngineRecord, RecordStore
from tests.conftest import SMOLLM2_REPO
from tests.manager.conftest import GOMGR
from tests.support.gomgr_env import Env

pytestmark = pytest.mark.slow

START_TIMEOUT_S = 240.0


def _until(check: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}"
        time.sleep(0.1)


def _owned(env: Env, key: str) -> EngineRecord | None:
    records = RecordStore(env.state).all()
    return next((r for r in records if r.labels.get(ENTRY_LABEL) == key), None)


@pytest.fixture(scope="module")
def engines_yaml(env: Env) -> Path:
    path = env.state.root.parent / "engines.yaml"
    path.write_text(
        f"engines:\n  - repo: {SMOLLM2_REPO}\n    name: smollm2\n    aliases: [small]\n"
    )
    return path


@pytest.fixture(scope="module")
def by_hand(env: Env) -> dict[str, Any]:
    result = env.gomgr("start", SMOLLM2_REPO)
    assert result.returncode == 0, result.stderr
    [row] = env.ps()
    return row


@pytest.fixture(scope="module")
def watch(env: Env, engines_yaml: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    out = engines_yaml.parent / "watch.out"
    with open(out, "w") as sink:
        process = subprocess.Popen(
            [str(GOMGR), "apply", "-f", str(engines_yaml), "--watch", "--interval", "0.5"],
            stdout=sink, stderr=subprocess.STDOUT, text=True, env=env.vars,
        )  # fmt: skip
    yield process, out
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_apply_starts_and_registers_the_engine_and_leaves_the_hand_started_one(
    env: Env, engines_yaml: Path, by_hand: dict[str, Any]
) -> None:
    result = env.gomgr("apply", "-f", str(engines_yaml))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"start smollm2: {SMOLLM2_REPO} is not running"
    assert lines[-1].startswith("started smollm2 (engine smollm2-")
    rows = {row["served_name"]: row for row in env.ps()}
    assert rows["smollm2"]["labels"][ENTRY_LABEL] == "smollm2"
    assert rows["smollm2"]["aliases"] == ["small"] and rows["smollm2"]["routed"] is True
    assert rows[SMOLLM2_REPO]["id"] == by_hand["id"] and rows[SMOLLM2_REPO]["labels"] == {}
    assert sorted(env.routed_models()) == sorted(["smollm2", SMOLLM2_REPO])
    client = OpenAI(base_url=f"{env.router_url}/v1", api_key="any")
    reply = client.chat.completions.create(
        model="small", messages=[{"role": "user", "content": "Say hello."}], max_tokens=4
    )
    assert reply.choices[0].message.content


def test_apply_again_has_nothing_to_do(env: Env, engines_yaml: Path) -> None:
    before = _owned(env, "smollm2")
    result = env.gomgr("apply", "-f", str(engines_yaml))
    assert (result.returncode, result.stdout) == (0, "nothing to do (1 engine up to date)\n")
    assert _owned(env, "smollm2") == before


def test_shell_completion_offers_engine_ids_and_names(env: Env, by_hand: dict[str, Any]) -> None:
    record = _owned(env, "smollm2")
    assert record is not None
    completion = {
        "_GOMGR_COMPLETE": "complete_bash",
        "COMP_WORDS": "gomgr stop smol",
        "COMP_CWORD": "2",
    }
    result = subprocess.run(
        [str(GOMGR)], capture_output=True, text=True, env=env.vars | completion, check=False
    )
    assert sorted(result.stdout.split()) == sorted([by_hand["id"], record.id, "smollm2"])


def test_watch_deregisters_a_killed_engine_and_starts_it_again_with_backoff(
    env: Env, watch: tuple[subprocess.Popen[str], Path]
) -> None:
    process, out = watch
    _until(lambda: "watching " in out.read_text(), 60, "the watch loop's first tick")
    assert "nothing to do (1 engine up to date)" in out.read_text()
    killed = _owned(env, "smollm2")
    assert killed is not None
    os.kill(killed.handle.pid, signal.SIGKILL)
    # NOTE: 2 s is the bound the design promises, polled, not a speed measurement.
    _until(lambda: "smollm2" not in env.routed_models(), 2, "route of the killed engine gone")
    _until(
        lambda: RecordStore(env.state).get(killed.id) is None, 2, "record of the killed engine gone"
    )

    def back() -> bool:
        record = _owned(env, "smollm2")
        return record is not None and record.id != killed.id and record.state == "ready"

    _until(back, START_TIMEOUT_S, "the engine started again")
    assert "smollm2" in env.routed_models()
    log = out.read_text()
    assert (
        f"engine {killed.id} (smollm2) is gone; its route and record are removed; starting it again in 1s"
        in log
    )
    assert "restarted smollm2" not in log and "started smollm2 (engine smollm2-" in log
    assert process.poll() is None


def test_watch_applies_an_edited_file_and_unloads_an_idle_engine(
    env: Env, engines_yaml: Path, watch: tuple[subprocess.Popen[str], Path], by_hand: dict[str, Any]
) -> None:
    process, out = watch
    replaced = _owned(env, "smollm2")
    assert replaced is not None
    # The hand-started engine serves the only name left in the file: the watch adopts it.
    engines_yaml.write_text(f"engines:\n  - repo: {SMOLLM2_REPO}\n    idle_unload_after: 2s\n")
    hand = psutil.Process(by_hand["pid"])
    _until(lambda: "smollm2" not in env.routed_models(), 30, "the removed entry's route gone")
    _until(lambda: not hand.is_running(), 60, "the adopted engine unloaded after 2 s idle")
    # NOTE: the engine ends before the watch's stop returns and it says so.
    _until(lambda: f"unloaded {SMOLLM2_REPO}" in out.read_text(), 30, "the watch's unload line")
    assert env.routed_models() == []
    assert not psutil.pid_exists(replaced.handle.pid)
    [row] = env.ps()
    assert (row["served_name"], row["state"], row["id"]) == (SMOLLM2_REPO, "unloaded", None)
    log = out.read_text()
    assert f"adopted {SMOLLM2_REPO} (engine {by_hand['id']}" in log
    assert f"unloaded {SMOLLM2_REPO} (engine {by_hand['id']}): no request for 2s" in log

    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0
    assert out.read_text().rstrip().endswith("stopped watching; the engines keep running")
    assert not status_path(env.state).exists() and env.ps() == []
    # An unloaded engine comes back on the next apply.
    result = env.gomgr("apply", "-f", str(engines_yaml), "--dry-run")
    assert result.stdout == f"start {SMOLLM2_REPO}: {SMOLLM2_REPO} is not running\n"
