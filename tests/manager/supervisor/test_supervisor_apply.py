"""`gomgr apply` handed to the supervisor (issue #23), real processes: the supervisor starts the
file's engines, lists every entry whether it runs or not, loads a stopped one on its first
request with the entry's settings, and remembers the file across its own restart."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import psutil
import pytest

from manager.lifecycle.desired_state import ENTRY_LABEL
from manager.state.records import RecordStore
from tests.conftest import SMOLLM2_REPO
from tests.support.gomgr_env import Env
from tests.support.on_demand import ask

pytestmark = pytest.mark.slow

NAME = "tiny"
IDLE_S = 2.0
WAIT_S = 90.0


@pytest.fixture(scope="module")
def engines_yaml(env: Env) -> Path:
    path = Path(env.vars["GOMGR_CONFIG_DIR"]).parent / "engines.yaml"
    path.write_text(
        f"engines:\n  - repo: {SMOLLM2_REPO}\n    name: {NAME}\n    idle_unload_after: {IDLE_S:.0f}s\n"
    )
    return path


def _states(env: Env) -> dict[str, str]:
    cards = httpx.get(f"{env.router_url}/v1/models", timeout=10).json()["data"]
    return {card["id"]: card["status"]["value"] for card in cards}


def _wait_for(check: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_apply_runs_in_the_supervisor(env: Env, engines_yaml: Path) -> None:
    result = env.gomgr("apply", "-f", str(engines_yaml))
    assert result.returncode == 0, result.stderr
    assert f"start {NAME}: {SMOLLM2_REPO} is not running" in result.stdout
    assert f"started {NAME} (engine " in result.stdout
    [record] = RecordStore(env.state).all()
    running = env.daemon().running()
    assert running is not None
    assert psutil.Process(record.handle.pid).ppid() == running.pid
    assert record.labels[ENTRY_LABEL] == NAME
    assert _states(env)[NAME] == "loaded"


def test_a_stopped_entry_is_listed_and_loads_on_its_first_request(env: Env) -> None:
    stopped = env.gomgr("stop", NAME)
    assert stopped.returncode == 0, stopped.stderr
    assert RecordStore(env.state).all() == []
    assert _states(env)[NAME] == "unloaded"

    assert ask(env, NAME)
    [record] = RecordStore(env.state).all()
    assert record.handle.spec.served_name == NAME
    assert record.labels[ENTRY_LABEL] == NAME  # NOTE: started with the entry's settings
    # NOTE: the entry's idle_unload_after is its keep-alive.
    _wait_for(lambda: not RecordStore(env.state).all(), "the idle entry was not unloaded")
    assert _states(env)[NAME] == "unloaded"


def test_a_restarted_supervisor_lists_the_applied_entries(env: Env) -> None:
    assert env.gomgr("router", "stop").returncode == 0
    assert env.gomgr("router", "start").returncode == 0
    assert _states(env)[NAME] == "unloaded"


def test_a_bad_file_is_one_line_and_exit_2(env: Env, engines_yaml: Path) -> None:
    bad = engines_yaml.with_name("bad.yaml")
    bad.write_text("engines:\n  - name: x\n")
    result = env.gomgr("apply", "-f", str(bad))
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {bad}")
