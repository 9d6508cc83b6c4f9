"""Bounded polling for tests that wait on another process to reach a state."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], what: str, timeout_s: float, poll_s: float = 0.1) -> None:
    """Polls `condition` until it is truthy; fails the test with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(poll_s)
