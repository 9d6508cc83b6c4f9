"""A frozen scheduler makes /health_generate and /health 503 until it resumes; a killed one
ends the server.

One short-lived server (not the shared one), started with a 3 s health-check timeout.
The tests run in file order: freeze/resume first, then the kill.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

EXIT_AFTER_KILL_S = 5.0


@pytest.fixture(scope="module")
def fragile_server(smollm2_dir: Path, launch_server: Callable[..., Any]) -> Iterator[Any]:
    server = launch_server(
        smollm2_dir,
        ["--max-total-tokens", "4096", "--skip-server-warmup"],
        env={"SGLANG_HEALTH_CHECK_TIMEOUT": "3"},
    )
    yield server
    server.stop_and_check()


def test_health_generate_503_while_scheduler_frozen(fragile_server: Any) -> None:
    scheduler = fragile_server.scheduler()
    with fragile_server.client(timeout_s=60.0) as client:
        assert client.get("/health_generate").status_code == 200
        time.sleep(1.5)  # past the "output just arrived" shortcut of /health_generate
        os.kill(scheduler.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            assert client.get("/health_generate").status_code == 503
            assert time.monotonic() - started < 30.0
            assert client.get("/health").status_code == 503
        finally:
            os.kill(scheduler.pid, signal.SIGCONT)
        deadline = time.monotonic() + 60.0
        while client.get("/health_generate").status_code != 200:
            assert time.monotonic() < deadline, "/health_generate never recovered after SIGCONT"
            time.sleep(0.5)
        assert client.get("/health").status_code == 200


def test_scheduler_sigkill_ends_server(fragile_server: Any) -> None:
    scheduler = fragile_server.scheduler()
    os.kill(scheduler.pid, signal.SIGKILL)
    killed = time.monotonic()
    try:
        returncode = fragile_server.process.wait(EXIT_AFTER_KILL_S)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"the server still runs {EXIT_AFTER_KILL_S:.0f} s after its scheduler was killed"
        )
    assert returncode != 0
    remaining = EXIT_AFTER_KILL_S - (time.monotonic() - killed)
    left = fragile_server.leftover_children(max(0.0, remaining))
    assert not left, f"children outlived the server: {[p.pid for p in left]}"
