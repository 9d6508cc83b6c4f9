"""The process runtime: the engine as a detached local process (`python -m engine.launch_server`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterator

import psutil

from manager.runtimes.base import EngineHandle, EngineSpec, Runtime
from manager.state.machine import EngineState
from manager.state.paths import StatePaths
from manager.state.records import EngineRecord, RecordStore

FOLLOW_POLL_S = 0.2
EXIT_WAIT_S = 1.0
# NOTE: the engines this process started, kept so their exit status is collected: in a
# long-lived starter (the supervisor) every engine another process stopped would otherwise
# stay a zombie, "running" to psutil, until the starter exits.
_started: dict[int, tuple[subprocess.Popen[bytes], float]] = {}  # pid → (it, create time)


def collect_exited_children() -> None:
    """Collect the exit status of every engine this process started that has ended."""
    for popen, _ in list(_started.values()):
        popen.poll()


class ProcessRuntime(Runtime):
    name = "process"

    def __init__(self, paths: StatePaths) -> None:
        super().__init__(paths)
        self.records = RecordStore(paths)

    def command(self, spec: EngineSpec) -> list[str]:
        return [
            sys.executable, "-m", "engine.launch_server", *spec.engine_args,
            "--host", spec.host, "--port", str(spec.port),
        ]

    def start(self, spec: EngineSpec) -> EngineHandle:
        log_path = self.records.log_path(spec.id)
        with open(log_path, "ab") as log:
            # NOTE: a new session, so the engine survives the CLI's exit and Ctrl-C in its
            # terminal, and its process group (= its pid) holds the scheduler and detokenizer
            # children that stop() signals together.
            process = subprocess.Popen(
                self.command(spec), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True, env={**os.environ, **dict(spec.env)},
            )
        create_time = psutil.Process(process.pid).create_time()
        _started[process.pid] = (process, create_time)
        handle = EngineHandle(
            spec=spec, runtime=self.name, pid=process.pid, create_time=create_time, log_path=log_path,
            started_at=time.time(),
        )
        self.records.save(EngineRecord(handle, EngineState.STARTING))
        return handle

    def stop(self, handle: EngineHandle, timeout_s: float = 15.0) -> None:
        process = _process(handle)
        if process is None:
            return
        group = [process, *_children(process)]
        _signal_group(handle.pid, signal.SIGTERM)
        _, alive = psutil.wait_procs(group, timeout=timeout_s)
        if alive:
            _signal_group(handle.pid, signal.SIGKILL)
            for proc in alive:
                _kill(proc)
            psutil.wait_procs(alive, timeout=5)

    def is_alive(self, handle: EngineHandle) -> bool:
        return _process(handle) is not None

    def exit_code(self, handle: EngineHandle) -> int | None:
        """Known only for an engine that was this process's child (the supervisor's own),
        whose exit status is collected here; -9 for SIGKILL."""
        popen, create_time = _started.get(handle.pid, (None, 0.0))
        if popen is not None and abs(create_time - handle.create_time) <= 0.5:
            # NOTE: wait, not poll: a poll while another thread collects the status (the
            # supervisor's sweep) answers None at once; an ended engine's wait is immediate.
            try:
                return popen.wait(timeout=EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                return None
        try:  # NOTE: a child this process started otherwise
            process = psutil.Process(handle.pid)
            if abs(process.create_time() - handle.create_time) > 0.5:
                return None
            pid, status = os.waitpid(handle.pid, os.WNOHANG)
        except (psutil.NoSuchProcess, ChildProcessError):
            return None
        return os.waitstatus_to_exitcode(status) if pid else None

    def logs(self, handle: EngineHandle, lines: int) -> list[str]:
        try:
            with open(handle.log_path, errors="replace") as f:
                return [line.rstrip("\n") for line in deque(f, maxlen=lines)]
        except FileNotFoundError:
            return []

    def follow(self, handle: EngineHandle) -> Iterator[str]:
        try:
            f = open(handle.log_path, errors="replace")  # noqa: SIM115
        except FileNotFoundError:
            return
        with f:
            f.seek(0, os.SEEK_END)
            partial = ""
            while True:
                chunk = f.readline()
                if chunk:
                    partial += chunk
                    if partial.endswith("\n"):
                        yield partial.rstrip("\n")
                        partial = ""
                    continue
                if not self.is_alive(handle):
                    if partial:
                        yield partial
                    return
                time.sleep(FOLLOW_POLL_S)

    def list_running(self) -> list[EngineHandle]:
        return [
            r.handle for r in self.records.all()
            if r.handle.runtime == self.name and self.is_alive(r.handle)
        ]


def _process(handle: EngineHandle) -> psutil.Process | None:
    """The engine's process if it still runs; None if gone, a zombie, or the pid was reused."""
    try:
        process = psutil.Process(handle.pid)
        # NOTE: create_time is read from /proc with jiffy resolution; a different process
        # that got the same pid later starts measurably later.
        if abs(process.create_time() - handle.create_time) > 0.5:
            return None
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
    except psutil.NoSuchProcess:
        return None
    return process


def _children(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _signal_group(pid: int, sig: signal.Signals) -> None:
    # NOTE: only a group the engine leads (pgid == pid, from start_new_session) is signalled,
    # never the caller's own group.
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _kill(process: psutil.Process) -> None:
    try:
        process.kill()
    except psutil.NoSuchProcess:
        pass

