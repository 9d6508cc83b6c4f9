"""The start a cold `gomgr start` hands the supervisor it boots (manager/supervisor/boot_start.py).

That such a start serves, with the engine the supervisor's child, is proven by the first
`gomgr start` of tests/manager/lifecycle/test_lifecycle_engine.py (a fresh state directory,
so it boots the supervisor). Here: its failure reaches the CLI as one line, only the CLI that
handed it over follows it, and a CLI that exits before following leaves nothing running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil

from manager.lifecycle.router_link import BOOT_START_ENV, SUPERVISOR_MODULE
from manager.state.records import RecordStore
from manager.supervisor.engine_messages import StartBody
from tests.conftest import SMOLLM2_REPO
from tests.support.gomgr_env import Env
from tests.support.waiting import wait_until

WAIT_S = 120.0
# NOTE: the CLI's part, played by a script: start the supervisor with a start handed over,
# wait until that start has recorded its engine, then exit without following it.
HAND_OVER_AND_EXIT = """
import subprocess, sys, time
from manager.state.paths import StatePaths
from manager.state.records import RecordStore
supervisor = subprocess.Popen(sys.argv[1:], start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
print(supervisor.pid, flush=True)
while not RecordStore(StatePaths.from_env()).all():
    time.sleep(0.05)
"""


def _wait(condition: Callable[[], object], what: str) -> None:
    wait_until(condition, what, WAIT_S, poll_s=0.1)


def _gone(pid: int) -> bool:
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_failed_boot_start_is_one_line_and_no_one_else_follows_it(env: Env, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    result = env.gomgr("start", str(missing), "--runtime", "process")
    assert result.returncode == 1, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and str(missing) in line
    assert RecordStore(env.state).all() == []
    # NOTE: the supervisor it booted still serves; its handed-over start was followed once.
    token = Path(env.vars["GOMGR_ROUTER_TOKEN_FILE"]).read_text().strip()
    again = httpx.post(
        f"{env.router_url}/admin/boot-start", headers={"authorization": f"Bearer {token}"}, timeout=10
    )
    assert again.status_code == 404
    assert "followed already" in again.json()["error"]["message"]


def test_a_boot_start_whose_cli_exits_before_following_is_undone(tmp_path: Path, smollm2_dir: Path) -> None:
    env = Env.isolated(tmp_path, smollm2_dir.parents[1])
    body = StartBody(repo=SMOLLM2_REPO, runtime="process", timeout_s=WAIT_S)
    supervisor = [
        sys.executable, "-m", SUPERVISOR_MODULE, "--host", "127.0.0.1", "--port", str(env.router_port),
        "--admin-token-file", env.vars["GOMGR_ROUTER_TOKEN_FILE"], "--log-level", "warning",
    ]  # fmt: skip
    cli = subprocess.run(
        [sys.executable, "-c", HAND_OVER_AND_EXIT, *supervisor],
        env={**env.vars, BOOT_START_ENV: body.model_dump_json()}, capture_output=True, text=True,
        timeout=WAIT_S, check=True,
    )  # fmt: skip
    supervisor_pid = int(cli.stdout)
    try:
        [record] = RecordStore(env.state).all()
        _wait(lambda: not RecordStore(env.state).all(), "the abandoned start left its record")
        _wait(lambda: _gone(record.handle.pid), "the abandoned start left its engine running")
        assert httpx.get(f"{env.router_url}/health", timeout=10).status_code == 200
        assert env.routed_models() == []
    finally:
        os.kill(supervisor_pid, signal.SIGTERM)
        _wait(lambda: _gone(supervisor_pid), "the supervisor did not stop")
        env.end_everything()
