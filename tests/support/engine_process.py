"""A real engine server (``python -m engine.launch_server``) as a subprocess, for tests and benches."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

START_TIMEOUT_S = 240.0
STOP_GRACE_S = 10.0
# NOTE: dozens of tests start a server and wait on this poll; one plain-HTTP probe on loopback
# costs the starting engine next to nothing (manager/lifecycle/health_wait.py polls as often).
HEALTH_POLL_S = 0.1


def stop_process(process: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM, up to `grace_s` for a clean exit, then SIGKILL: only this pid."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(grace_s)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# NOTE: below Linux's ephemeral range (32768-60999 by default), so no outgoing connection of a
# concurrent test takes one of the block's ports between this probe and the engines' bind.
_BLOCK_PORTS = range(20000, 32000)


def free_port_block(count: int) -> int:
    """The first of `count` consecutive loopback ports that are all free now."""
    rng = random.Random()
    for _ in range(200):
        first = rng.randrange(_BLOCK_PORTS.start, _BLOCK_PORTS.stop - count)
        if all(_bindable(first + offset) for offset in range(count)):
            return first
    raise RuntimeError(f"no {count} consecutive free ports in {_BLOCK_PORTS}")


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class EngineServer:
    """A running server, its children (recorded once healthy) and how to reach it."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    children: list[psutil.Process] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, timeout_s: float = 120.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout_s)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "<no log>"

    def token_count(self, text: str) -> int:
        """How many tokens ``text`` is, by the server's own /tokenize (no special tokens)."""
        reply = httpx.post(f"{self.url}/tokenize", json={"prompt": text, "add_special_tokens": False})
        return int(reply.json()["count"])

    def scheduler(self) -> psutil.Process:
        """The scheduler child: the one that loaded the model, i.e. the largest RSS."""
        alive = [c for c in self.children if c.is_running()]
        return max(alive, key=lambda c: c.memory_info().rss)

    def stop(self) -> None:
        """SIGTERM, up to STOP_GRACE_S for a clean exit, then SIGKILL."""
        stop_process(self.process)

    def leftover_children(self, timeout_s: float) -> list[psutil.Process]:
        _, alive = psutil.wait_procs(self.children, timeout=timeout_s)
        return alive

    def stop_and_check(self) -> None:
        """Stops the server; asserts no child is left and, if it was still running, that
        SIGTERM made it exit cleanly (status 0, not killed)."""
        was_running = self.process.poll() is None
        self.stop()
        left = self.leftover_children(STOP_GRACE_S)
        for child in left:
            child.kill()
        assert not left, f"children left after the server stopped: {[p.pid for p in left]}\n{self.log_tail()}"
        if was_running:
            assert self.process.returncode == 0, f"exit {self.process.returncode}\n{self.log_tail()}"


def start_engine_server(
    model_dir: Path,
    log_path: Path,
    extra_args: list[str],
    env: dict[str, str] | None = None,
    port: int | None = None,
) -> EngineServer:
    """Starts the server (on a free port unless given one) and waits (bounded) until /health
    answers 200."""
    port = port or free_port()
    command = [
        sys.executable, "-m", "engine.launch_server",
        "--model-path", str(model_dir), "--host", "127.0.0.1", "--port", str(port), *extra_args,
    ]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    server = EngineServer(process, port, log_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    with httpx.Client(base_url=server.url, timeout=10.0) as client:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"engine exited with {process.returncode} during start-up:\n{server.log_tail()}")
            try:
                if client.get("/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"engine not healthy after {START_TIMEOUT_S:.0f} s:\n{server.log_tail()}")
            time.sleep(HEALTH_POLL_S)
    server.children = psutil.Process(process.pid).children(recursive=True)
    return server


@contextmanager
def engine_server(
    model_dir: Path, log_dir: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[EngineServer]:
    """A healthy server for the ``with`` block; stopped (and checked) afterwards."""
    server = start_engine_server(model_dir, log_dir / f"engine-{free_port()}.log", list(args), env)
    try:
        yield server
    finally:
        server.stop_and_check()
