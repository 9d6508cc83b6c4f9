"""A real engine server (``python -m engine.launch_server``) as a subprocess for tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil

START_TIMEOUT_S = 240.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class EngineServer:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def token_count(self, text: str) -> int:
        """How many tokens ``text`` is, by the server's own /tokenize (no special tokens)."""
        reply = httpx.post(f"{self.url}/tokenize", json={"prompt": text, "add_special_tokens": False})
        return int(reply.json()["count"])

    def children(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children(recursive=True)


def _wait_healthy(server: EngineServer) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"engine exited with {server.process.returncode}:\n{server.log_tail()}")
        try:
            if httpx.get(f"{server.url}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"engine not healthy after {START_TIMEOUT_S} s:\n{server.log_tail()}")


def stop(server: EngineServer) -> None:
    """SIGTERM, a bounded wait, then SIGKILL; the server's children go with it."""
    children = server.children() if server.process.poll() is None else []
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(15)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(5)
    _, alive = psutil.wait_procs(children, timeout=10)
    for child in alive:
        child.kill()


@contextmanager
def engine_server(
    model_dir: Path, log_dir: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[EngineServer]:
    port = free_port()
    log_path = log_dir / f"engine-{port}.log"
    command = [
        sys.executable, "-m", "engine.launch_server",
        "--model-path", str(model_dir), "--host", "127.0.0.1", "--port", str(port), *args,
    ]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    server = EngineServer(process, port, log_path)
    try:
        _wait_healthy(server)
        yield server
    finally:
        stop(server)
