"""`gomgr start` brings the router up on a thread while the engine loads: what that thread
ends with reaches the start."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from manager.lifecycle.errors import RouterUnavailable
from manager.lifecycle.router_link import RouterLink
from router.daemon import RouterDaemon, RouterDaemonError


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_router_that_cannot_start_fails_the_future_with_its_log(tmp_path: Path) -> None:
    # NOTE: a module that does not exist: the router process exits at once, as a broken
    # install would.
    daemon = RouterDaemon(
        run_dir=tmp_path, host="127.0.0.1", port=_free_port(), token_file=tmp_path / "token",
        module="manager.no_such_router_module",
    )
    started = RouterLink(daemon).ensure_in_background()
    with pytest.raises(RouterUnavailable) as failed:
        started.result(timeout=60)
    assert "No module named manager.no_such_router_module" in failed.value.details


def test_two_routers_launched_at_once_leave_one_and_neither_launch_fails(tmp_path: Path) -> None:
    """Two cold `gomgr start`s at once each launch a supervisor; the one that loses the port
    exits having started nothing, and its launcher uses the winner (the bare router here)."""
    daemon = RouterDaemon(run_dir=tmp_path, host="127.0.0.1", port=_free_port(), token_file=tmp_path / "token")
    launched = [daemon.launch(), daemon.launch()]
    try:
        outcomes = sorted(daemon.wait_started(process) for process in launched)
        assert outcomes == [False, True]
        [alive] = [process for process in launched if process.poll() is None]
        found = daemon.running()
        assert found is not None and found.pid == alive.pid
    finally:
        daemon.stop()
        for process in launched:
            process.kill()
            process.wait(10)


def test_a_port_held_by_something_else_is_still_an_error(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = int(held.getsockname()[1])
        daemon = RouterDaemon(run_dir=tmp_path, host="127.0.0.1", port=port, token_file=tmp_path / "token")
        with pytest.raises(RouterDaemonError, match="exited with status 1 at start:(.|\n)*cannot listen"):
            daemon.wait_started(daemon.launch(), timeout_s=3)
    assert daemon.running() is None
