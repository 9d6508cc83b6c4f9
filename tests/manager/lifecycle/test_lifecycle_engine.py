"""The real path: `gomgr start/ps/stop` with real engine processes and a background router.

Everything lives in the isolated `env` of tests/manager/conftest.py. Tests run in file order
and share one engine until test_stop stops it. That a `kill -9` of an engine removes its route
within 2 s and its record with no `gomgr` command is proven in
tests/manager/supervisor/test_supervisor_crash.py (the supervisor reaps every engine alike).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psutil
import pytest
from openai import OpenAI

from manager.state.records import RecordStore
from router.daemon import RouterDaemon
from tests.conftest import SMOLLM2_REPO
from tests.support.gomgr_env import Env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def started(env: Env) -> dict[str, Any]:
    result = env.gomgr("start", SMOLLM2_REPO, "--json")
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout)) | {"stderr": result.stderr}


def test_start_says_process_runtime_and_why_then_serves_through_the_router(
    env: Env, started: dict[str, Any]
) -> None:
    runtime_lines = [line for line in started["stderr"].splitlines() if line.startswith("runtime:")]
    assert len(runtime_lines) == 1
    assert runtime_lines[0].startswith("runtime: process (") and runtime_lines[0].endswith(")")
    assert started["state"] == "ready"
    # NOTE: the engine is the supervisor's child: the supervisor started it, not this CLI.
    supervisor = env.daemon().running()
    assert supervisor is not None
    assert psutil.Process(started["pid"]).ppid() == supervisor.pid
    client = OpenAI(base_url=f"{env.router_url}/v1", api_key="any")
    reply = client.chat.completions.create(
        model=started["served_name"], messages=[{"role": "user", "content": "Say hello."}],
        max_tokens=8, temperature=0,
    )
    assert reply.choices[0].message.content
    [row] = env.ps()
    assert (row["id"], row["state"], row["routed"]) == (started["id"], "ready", True)


def test_a_restarted_router_routes_the_running_engine_again(env: Env, started: dict[str, Any]) -> None:
    assert env.daemon().stop()
    # NOTE: the engine outlives the supervisor that started it; the next one adopts it.
    assert psutil.pid_exists(started["pid"])
    assert env.gomgr("router", "start").returncode == 0
    assert env.routed_models() == [started["served_name"]]
    [row] = env.ps()
    assert row["routed"] is True


def test_ps_registers_the_engine_again_with_a_bare_router(env: Env, started: dict[str, Any]) -> None:
    daemon = env.daemon()
    assert daemon.stop()
    bare = RouterDaemon(daemon.run_dir, daemon.host, daemon.port, daemon.token_file)
    bare.start()  # NOTE: the bare router (python -m router), which knows no engine
    assert env.routed_models() == []
    [row] = env.ps()
    assert row["routed"] is True
    assert env.routed_models() == [started["served_name"]]
    assert bare.stop()
    assert env.gomgr("router", "start").returncode == 0


def test_stop_leaves_no_process_and_no_route(env: Env, started: dict[str, Any]) -> None:
    engine = psutil.Process(started["pid"])
    group = [engine, *engine.children(recursive=True)]
    result = env.gomgr("stop", started["served_name"])  # NOTE: a served name with a slash
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"stopped {started['id']} ({started['served_name']})"
    assert not [p for p in group if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert env.routed_models() == []
    assert env.ps() == []
    assert not RecordStore(env.state).all()
    assert env.gomgr("stop", started["id"]).returncode == 6


def test_restart_gives_a_new_engine_on_the_same_port_and_name(env: Env) -> None:
    first = json.loads(env.gomgr("start", SMOLLM2_REPO, "--json").stdout)
    result = env.gomgr("restart", first["served_name"], "--json")
    assert result.returncode == 0, result.stderr
    second = json.loads(result.stdout)
    assert second["id"] != first["id"]
    assert (second["port"], second["served_name"], second["runtime"]) == (
        first["port"], first["served_name"], first["runtime"]
    )
    assert not psutil.pid_exists(first["pid"]) or psutil.Process(first["pid"]).status() == psutil.STATUS_ZOMBIE
    [row] = env.ps()
    assert (row["id"], row["routed"]) == (second["id"], True)
    assert env.gomgr("restart", "no-such-engine").returncode == 6
    assert env.gomgr("stop", second["id"]).returncode == 0


def test_a_failed_start_prints_the_engine_log_and_leaves_nothing_running(
    env: Env, tmp_path: Path
) -> None:
    bad = tmp_path / "broken-model"
    bad.mkdir()
    (bad / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    result = env.gomgr("start", str(bad), "--timeout", "120")
    assert result.returncode == 4, result.stderr
    assert "exited before it became healthy" in result.stderr
    assert "engine.launch_server" in result.stderr  # the engine's own last log lines
    assert not RecordStore(env.state).all()
    assert not [
        p for p in psutil.process_iter(["cmdline"]) if str(bad) in " ".join(p.info["cmdline"] or [])
    ]
    assert env.ps() == []
