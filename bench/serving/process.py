"""A server as a subprocess: started on a free 127.0.0.1 port, health-waited, stopped by pid."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

STOP_GRACE_S = 15.0


class ServerFailed(RuntimeError):
    """The server exited or never became healthy; the message ends with its log tail."""


def exit_on_sigterm() -> None:
    """Turns SIGTERM into SystemExit, so the `finally` blocks stop the servers a run started."""
    signal.signal(signal.SIGTERM, lambda signum, _frame: sys.exit(128 + signum))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "<no log>"

    def stop(self) -> None:
        """SIGTERM to the server's own process group, a bounded wait, then SIGKILL."""
        # NOTE: the group holds only what this server spawned (start_new_session below), e.g.
        # vLLM's engine-core process, so nothing of anyone else's is signalled.
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(STOP_GRACE_S)


def start_server(
    command: list[str],
    port: int,
    log_path: Path,
    env: dict[str, str],
    ready_path: str,
    timeout_s: float,
) -> Server:
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            start_new_session=True,
        )
    server = Server(process, port, log_path)
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=server.url, timeout=10.0) as client:
        while True:
            if process.poll() is not None:
                server.stop()
                raise ServerFailed(
                    f"exited with {process.returncode} during start-up:\n{server.log_tail()}"
                )
            try:
                if client.get(ready_path).status_code == 200:
                    return server
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                server.stop()
                raise ServerFailed(f"not healthy after {timeout_s:.0f} s:\n{server.log_tail()}")
            time.sleep(0.5)
