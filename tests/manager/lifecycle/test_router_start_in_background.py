"""`gomgr start` brings the router up on a thread while the engine loads: what that thread
ends with reaches the start."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from manager.lifecycle.errors import RouterUnavailable
from manager.lifecycle.router_link import RouterLink
from router.daemon import RouterDaemon


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
