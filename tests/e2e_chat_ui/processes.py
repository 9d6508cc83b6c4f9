"""Servers the chat-UI tests start as subprocesses: wait until they answer, end them by pid."""

from __future__ import annotations

import subprocess
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support.engine_process import stop_process

STOP_GRACE_S = 15.0


@dataclass
class Served:
    """One server process, its log and the URL that says it is up."""

    process: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self, lines: int = 40) -> str:
        with open(self.log_path, errors="replace") as f:
            return "".join(deque(f, maxlen=lines))

    def wait_ready(self, ready_url: str, timeout_s: float) -> None:
        """Until `ready_url` answers 200; fails with the log tail if the process exits first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.process.args} exited with {self.process.returncode}:\n{self.log_tail()}"
                )
            try:
                if httpx.get(ready_url, timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"{ready_url} did not answer within {timeout_s} s:\n{self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM, a bounded wait, then SIGKILL: only this process, by its pid."""
        stop_process(self.process, STOP_GRACE_S)


def launch(command: list[str], env: dict[str, str], log_path: Path) -> Served:
    """Start `command` in the background, its output into `log_path`; not yet waited for."""
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
    return Served(process, log_path)
