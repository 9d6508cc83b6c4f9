"""Real subprocesses for router tests: the router itself and deterministic echo upstreams."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.engine_process import free_port

ECHO_SERVER = Path(__file__).with_name("echo_server.py")
REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 30.0


@dataclass
class Proc:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def kill9(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


@dataclass
class Router(Proc):
    token: str

    def admin(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"authorization": f"Bearer {self.token}"}
        return httpx.request(method, f"{self.url}/admin{path}", headers=headers, timeout=10, **kwargs)

    def register(self, upstream: Proc | str, model: str, **fields: Any) -> dict[str, Any]:
        base_url = upstream if isinstance(upstream, str) else upstream.url
        reply = self.admin("POST", "/backends", json={"model": model, "base_url": base_url, **fields})
        assert reply.status_code == 201, reply.text
        return dict(reply.json())


def start(
    command: list[str], port: int, log_path: Path, ready_path: str = "/health",
    timeout_s: float = START_TIMEOUT_S,
) -> Proc:
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    proc = Proc(process, port, log_path)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{command} exited with {process.returncode}:\n{proc.log_tail()}")
        try:
            httpx.get(f"{proc.url}{ready_path}", timeout=2)
            return proc
        except httpx.TransportError:
            time.sleep(0.1)
    stop(proc)
    raise RuntimeError(f"{command} did not listen within {timeout_s} s:\n{proc.log_tail()}")


def stop(proc: Proc) -> None:
    """SIGTERM, a bounded wait, then SIGKILL; by pid, only what the test started."""
    if proc.process.poll() is None:
        proc.process.send_signal(signal.SIGTERM)
        try:
            proc.process.wait(10)
        except subprocess.TimeoutExpired:
            proc.process.kill()
            proc.process.wait(5)


def start_echo(log_dir: Path, model: str = "echo-model", health_status: int = 200) -> Proc:
    port = free_port()
    command = [sys.executable, str(ECHO_SERVER), "--port", str(port), "--model", model,
               "--health-status", str(health_status)]
    return start(command, port, log_dir / f"echo-{port}.log")


def start_router(log_dir: Path, *args: str) -> Router:
    port = free_port()
    token_file = log_dir / f"router-{port}.token"
    command = [sys.executable, "-m", "router", "--port", str(port), "--admin-token-file",
               str(token_file), "--health-interval", "0.2", "--log-level", "warning", *args]
    proc = start(command, port, log_dir / f"router-{port}.log")
    return Router(proc.process, proc.port, proc.log_path, token_file.read_text().strip())


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def echo(log_dir: Path) -> Iterator[Proc]:
    proc = start_echo(log_dir)
    yield proc
    stop(proc)


@pytest.fixture
def router(log_dir: Path) -> Iterator[Router]:
    proc = start_router(log_dir)
    yield proc
    stop(proc)
