"""The router as a background process: start it detached, find it again, stop it.

Its run directory holds `router.json` (pid, process start time, host, port, token file) and
`router.log`. Used by the manager (`gomgr start` starts a router when none runs); the router
itself never imports the manager, so every path comes in as an argument.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

# NOTE (issue 30): psutil and httpx are imported where a router is checked or waited for: a
# cold `gomgr start` launches its supervisor first (manager/cli/early_start.py).
if TYPE_CHECKING:
    import httpx
    import psutil

START_TIMEOUT_S = 30.0
# NOTE (issue 30): a cold `gomgr start` waits on this loop before it can even ask for the
# engine, so it polls tightly: a bare TCP connect until the port is bound (microseconds),
# then /health over one client without TLS verification (plain HTTP on loopback; httpx's
# default loads a CA bundle into a new SSL context per call, ~40 ms).
START_POLL_S = 0.02
STOP_TIMEOUT_S = 10.0


class RouterDaemonError(Exception):
    """The background router could not be started; the message says why, with its log tail."""


@dataclass(frozen=True)
class RouterProcess:
    pid: int
    create_time: float
    host: str
    port: int
    token_file: str
    log_path: str

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@dataclass(frozen=True)
class RouterDaemon:
    run_dir: Path
    host: str
    port: int
    token_file: Path
    # NOTE: the module run as `python -m MODULE` with the router's flags: the manager runs its
    # supervisor (the router with an on-demand loader) in place of the bare router.
    module: str = "router"

    @property
    def record_path(self) -> Path:
        return self.run_dir / "router.json"

    @property
    def log_path(self) -> Path:
        return self.run_dir / "router.log"

    def running(self) -> RouterProcess | None:
        """The router this directory started, if it still runs; a stale record is removed."""
        try:
            found = RouterProcess(**json.loads(self.record_path.read_text()))
        except FileNotFoundError:
            return None
        except (ValueError, TypeError):
            self.record_path.unlink(missing_ok=True)
            return None
        if _process(found) is None:
            self.record_path.unlink(missing_ok=True)
            return None
        return found

    def start(self, timeout_s: float = START_TIMEOUT_S, env: Mapping[str, str] | None = None) -> bool:
        """Start the router detached, `env` added to its environment, and wait until its /health
        answers; True once it does, False (and nothing started) when one of this directory runs."""
        if self.running():
            return False
        return self.wait_started(self.launch(env), timeout_s)

    def launch(self, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """The router's process, launched detached with `env` added to its environment; it
        is ours once `wait_started` has seen it answer."""
        self.run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        command = [
            sys.executable, "-m", self.module, "--host", self.host, "--port", str(self.port),
            "--admin-token-file", str(self.token_file), "--log-level", "warning",
        ]
        with open(self.log_path, "ab") as log:
            # NOTE: a new session: the router outlives the command that started it.
            return subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True, env={**os.environ, **(env or {})},
            )

    def wait_started(self, process: subprocess.Popen[bytes], timeout_s: float = START_TIMEOUT_S) -> bool:
        """Wait until the `launch`ed router answers /health and record it (True); False where it
        exited because another launch of this router took the port and that one answers in
        time (it lost a race: nothing of this call runs); else RouterDaemonError, the router
        ended, if it exits first or does not answer in time."""
        import psutil

        found = RouterProcess(
            pid=process.pid, create_time=psutil.Process(process.pid).create_time(),
            host=self.host, port=self.port, token_file=str(self.token_file), log_path=str(self.log_path),
        )
        # NOTE: imported once the process runs: it boots meanwhile (see START_POLL_S).
        import httpx

        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=2, verify=False) as client:
            lost_the_port = False
            while time.monotonic() < deadline:
                if not lost_the_port and process.poll() is not None:
                    if not self._port_held_by_a_sibling():
                        raise RouterDaemonError(
                            f"the router exited with status {process.returncode} at start:\n{self.log_tail()}"
                        )
                    # NOTE: another launch of this router won the port (two cold `gomgr
                    # start`s at once): ours exited at its bind, having started nothing.
                    lost_the_port = True
                if lost_the_port:
                    if _healthy(client, found.url):
                        return False
                elif (
                    _listening(self.host, self.port)
                    and _healthy(client, found.url)
                    and _listens_on(process.pid, self.port)
                ):
                    _write_atomic(self.record_path, json.dumps(asdict(found)) + "\n")
                    return True
                time.sleep(START_POLL_S)
        _end(process.pid)
        raise RouterDaemonError(f"the router did not answer within {timeout_s:.0f} s:\n{self.log_tail()}")

    def _port_held_by_a_sibling(self) -> bool:
        """Whether the process listening on this router's port runs this router's module;
        False where that cannot be told (another user's process, a platform that hides it)."""
        import psutil

        try:
            holders = [
                c.pid for c in psutil.net_connections(kind="tcp")
                if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == self.port and c.pid
            ]  # fmt: skip
            command = psutil.Process(holders[0]).cmdline() if holders else []
        except psutil.Error:
            return False
        return "-m" in command and self.module in command

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> bool:
        """SIGTERM, a bounded wait, then SIGKILL. False when no router of ours ran."""
        found = self.running()
        if found is None:
            return False
        _end(found.pid, timeout_s)
        self.record_path.unlink(missing_ok=True)
        return True

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(deque(f, maxlen=lines)).rstrip("\n")
        except FileNotFoundError:
            return "(no log)"


def _listening(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
    except OSError:
        return False
    return True


def _listens_on(pid: int, port: int) -> bool:
    """Whether process `pid` itself holds the listening socket on `port` (a router launched
    at the same moment may answer there first, and ours then exits at its bind); True where
    its sockets cannot be read, as before this check."""
    import psutil

    try:
        connections = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.Error:
        return True
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in connections)


def _healthy(client: httpx.Client, url: str) -> bool:
    import httpx

    try:
        return client.get(f"{url}/health").status_code == 200
    except httpx.TransportError:
        return False


def _process(found: RouterProcess) -> psutil.Process | None:
    import psutil

    try:
        process = psutil.Process(found.pid)
        # NOTE: a pid reused by another program after a reboot or crash has another start time.
        if abs(process.create_time() - found.create_time) > 0.5 or process.status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.NoSuchProcess:
        return None
    return process


def _end(pid: int, timeout_s: float = STOP_TIMEOUT_S) -> None:
    import psutil

    try:
        process = psutil.Process(pid)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout_s)
    except psutil.NoSuchProcess:
        return
    except psutil.TimeoutExpired:
        process.kill()
        process.wait(5)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
