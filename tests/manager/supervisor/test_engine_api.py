"""`gomgr start / stop / restart` as clients of the supervisor's engine API (issue #23): the
supervisor (the background router) runs the engines, so it is the one writer of their records.
Real processes throughout: the CLI, the supervisor, SmolLM2 engines. That a plain `gomgr start`
runs the engine as the supervisor's child, and `gomgr stop NAME`, are proven on the engine
of tests/manager/lifecycle/test_lifecycle_engine.py."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable

import httpx
import psutil
import pytest

from manager.state.records import RecordStore
from tests.conftest import SMOLLM2_REPO
from tests.support.gomgr_env import GOMGR, Env
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

WAIT_S = 120.0


def _wait(condition: Callable[[], object], what: str) -> None:
    wait_until(condition, what, WAIT_S, poll_s=0.2)


def test_bad_keep_alive_is_a_usage_error(env: Env) -> None:
    result = env.gomgr("start", SMOLLM2_REPO, "--keep-alive", "soon")
    assert result.returncode == 2
    assert "--keep-alive" in result.stderr
    assert RecordStore(env.state).all() == []


def test_start_with_keep_alive_is_unloaded_when_idle_and_loads_again(env: Env) -> None:
    record = env.start(SMOLLM2_REPO, "--keep-alive", "2s")
    [row] = env.ps()
    assert row["id"] == record["id"]
    assert isinstance(row["expires_at"], float)
    _wait(lambda: not RecordStore(env.state).all(), "the idle engine was not unloaded")
    models = httpx.get(f"{env.router_url}/v1/models", timeout=10).json()["data"]
    assert record["served_name"] in [m["id"] for m in models]

    reply = httpx.post(
        f"{env.router_url}/v1/chat/completions", timeout=120,
        json={"model": record["served_name"], "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4},
    )
    assert reply.status_code == 200, reply.text
    stopped = env.gomgr("stop", "--all")
    assert stopped.returncode == 0, stopped.stderr
    assert RecordStore(env.state).all() == []


def test_stop_of_no_engine_is_one_line_and_exit_6(env: Env) -> None:
    # NOTE: the supervisor's answer: the test above left it running.
    result = env.gomgr("stop", "no-such-engine")
    assert result.returncode == 6
    assert result.stderr.strip().splitlines() == [
        "error: no running engine has the id or served name 'no-such-engine' (see gomgr ps)"
    ]


def test_ctrl_c_during_start_leaves_nothing_running(env: Env) -> None:
    env.gomgr("router", "start")
    cli = subprocess.Popen(
        [str(GOMGR), "start", SMOLLM2_REPO], env=env.vars, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )
    try:
        _wait(lambda: RecordStore(env.state).all(), "the engine never started")
        [record] = RecordStore(env.state).all()
        cli.send_signal(signal.SIGINT)
        cli.wait(30)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait(10)
    assert cli.returncode != 0
    _wait(lambda: not RecordStore(env.state).all(), "the cancelled start left its record")
    _wait(lambda: not psutil.pid_exists(record.handle.pid)
          or psutil.Process(record.handle.pid).status() == psutil.STATUS_ZOMBIE,
          "the cancelled start left its engine running")
    assert env.routed_models() == []
