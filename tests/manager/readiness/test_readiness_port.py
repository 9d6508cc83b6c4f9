"""The port check binds on 127.0.0.1 for real."""

from __future__ import annotations

import socket

from manager.readiness.port import check_port, port_is_free


def test_taken_port_is_a_blocker() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]

        (blocker,) = check_port(port)

    assert blocker.id == "port-in-use"
    assert str(port) in blocker.title
    assert set(blocker.blocks) == {"docker", "process"}


def test_released_port_is_free() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert port_is_free(port)
    assert check_port(port) == ()
