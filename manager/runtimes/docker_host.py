"""Where the Docker daemon is expected: what the docker SDK's `from_env` connects to.

Kept apart from runtimes/docker.py so that a command can tell "no daemon can be there"
without importing the SDK (about 0.1 s of start-up).
"""

from __future__ import annotations

import os
from pathlib import Path

# NOTE: the docker SDK's own default when DOCKER_HOST is unset (it does not read CLI contexts).
DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
UNIX_SCHEME = "unix://"


def docker_host() -> str:
    return os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


def daemon_socket_missing() -> bool:
    """True when the daemon address is a unix socket that does not exist (no daemon there)."""
    host = docker_host()
    return host.startswith(UNIX_SCHEME) and not Path(host.removeprefix(UNIX_SCHEME)).exists()
