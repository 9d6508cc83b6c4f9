"""The admin API: token file, auth, register / list / deregister, owner reports, events."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import httpx

from tests.router.conftest import Proc, Router, start_echo, stop


def test_token_file_is_private_and_guards_the_admin_api(router: Router, log_dir: Path) -> None:
    token_file = log_dir / f"router-{router.port}.token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert len(router.token) >= 32
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": router.token}):
        reply = httpx.get(f"{router.url}/admin/backends", headers=headers, timeout=10)
        assert reply.status_code == 401
        assert reply.json()["error"]["type"] == "authentication_error"
    assert router.admin("GET", "/backends").json() == {"backends": []}


def test_register_list_deregister(router: Router, echo: Proc) -> None:
    shown = router.register(echo, "echo-model", id="echo-1", kind="openai", aliases=["e"])
    assert shown["state"] == "ready" and shown["owned_by"] == "echo-org"
    assert [b["id"] for b in router.admin("GET", "/backends").json()["backends"]] == ["echo-1"]
    assert router.admin("DELETE", "/backends/echo-1").json()["removed"]["id"] == "echo-1"
    assert router.admin("GET", "/backends").json() == {"backends": []}
    assert router.admin("DELETE", "/backends/echo-1").status_code == 404
    assert httpx.get(f"{router.url}/v1/models", timeout=10).json()["data"] == []


def test_bad_registrations_are_refused(router: Router) -> None:
    from tests.support.engine_process import free_port

    closed = f"http://127.0.0.1:{free_port()}"
    reply = router.admin("POST", "/backends", json={"model": "m", "base_url": closed})
    assert reply.status_code == 422 and reply.json()["error"]["param"] == "base_url"
    reply = router.admin("POST", "/backends", json={"model": "m", "base_url": "ftp://x"})
    assert reply.status_code == 400 and "base_url" in reply.json()["error"]["message"]


def test_owner_reports_dead_and_events_announce_it(router: Router, echo: Proc) -> None:
    headers = {"authorization": f"Bearer {router.token}"}
    with httpx.stream("GET", f"{router.url}/admin/events", headers=headers, timeout=10) as events:
        lines = events.iter_lines()
        assert json.loads(next(lines).removeprefix("data: ")) == {"type": "snapshot", "backends": []}
        router.register(echo, "echo-model", id="b1", kind="openai")
        reply = router.admin("POST", "/backends/b1/state", json={"state": "dead", "reason": "container exited"})
        assert reply.status_code == 200
        seen: list[tuple[str, str]] = []
        for line in lines:  # NOTE: bounded by the read timeout and the break below
            if line.startswith("data: "):
                event = json.loads(line.removeprefix("data: "))
                seen.append((event["type"], event["backend"]["state"]))
                if event["type"] == "removed":
                    break
    assert seen[0] == ("registered", "starting")
    assert ("state", "ready") in seen
    assert seen[-2:] == [("state", "dead"), ("removed", "dead")]
    assert router.admin("GET", "/backends").json() == {"backends": []}


def test_starting_backend_answers_503_with_retry_after(router: Router, log_dir: Path) -> None:
    starting = start_echo(log_dir, health_status=503)
    try:
        assert router.register(starting, "echo-model", kind="openai")["state"] == "starting"
        reply = httpx.post(f"{router.url}/v1/chat/completions", timeout=10,
                           json={"model": "echo-model", "messages": [{"role": "user", "content": "hi"}]})
        assert reply.status_code == 503
        assert int(reply.headers["retry-after"]) > 0
        assert reply.json()["error"]["code"] == "model_starting"
    finally:
        stop(starting)
