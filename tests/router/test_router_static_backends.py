"""`python -m router --backends FILE` (the ConfigMap of `gomgr deploy render`): backends known
from the start, kept while nothing listens at their URL, served once something does."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.router.conftest import ECHO_SERVER, Router, start, start_router, stop
from tests.support.engine_process import free_port

CHAT = {"model": "echo-model", "messages": [{"role": "user", "content": "one two"}]}


def _wait_for(predicate: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout_s} s")


def _state(router: Router) -> str | None:
    backends = router.admin("GET", "/backends").json()["backends"]
    return next((str(b["state"]) for b in backends if b["id"] == "echo"), None)


def test_a_pinned_backend_waits_for_its_upstream_and_outlives_it(log_dir: Path) -> None:
    port = free_port()
    backends = log_dir / "backends.yaml"
    backends.write_text(
        "backends:\n"
        f"  - {{id: echo, model: echo-model, base_url: 'http://127.0.0.1:{port}', kind: openai,"
        " aliases: [echo-alias]}\n"
    )
    router = start_router(log_dir, "--backends", str(backends))
    echo = None
    try:
        time.sleep(0.5)  # NOTE: a few health intervals (0.2 s) against a closed port
        assert _state(router) == "starting"
        refused = httpx.post(f"{router.url}/v1/chat/completions", json=CHAT, timeout=10)
        assert refused.status_code == 503, refused.text
        command = [sys.executable, str(ECHO_SERVER), "--port", str(port), "--model", "echo-model"]
        echo = start(command, port, log_dir / "echo.log")
        _wait_for(lambda: _state(router) == "ready", 5.0)
        answer = httpx.post(
            f"{router.url}/v1/chat/completions", json={**CHAT, "model": "echo-alias"}, timeout=10
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == "one two"
        echo.kill9()
        # NOTE: a request that finds the port closed before the health monitor does keeps
        # the pinned backend too
        gone = httpx.post(f"{router.url}/v1/chat/completions", json=CHAT, timeout=10)
        assert gone.status_code in (502, 503), gone.text
        _wait_for(lambda: _state(router) == "starting", 5.0)
    finally:
        if echo is not None:
            stop(echo)
        stop(router)


def test_a_bad_backends_file_is_one_line_and_nothing_listens(log_dir: Path) -> None:
    backends = log_dir / "backends.yaml"
    backends.write_text("backends:\n  - {model: m, base_url: 'ftp://x'}\n")
    done = subprocess.run(
        [sys.executable, "-m", "router", "--port", str(free_port()), "--backends", str(backends),
         "--admin-token-file", str(log_dir / "token")],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"error: --backends {backends}: backends.0.base_url: base_url must be "
        "http(s)://host:port[/prefix] without query"
    )
