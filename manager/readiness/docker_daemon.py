"""Check 1: the Docker CLI is installed and the daemon answers a ping."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

from manager.readiness.blocker import Blocker
from manager.runtimes.docker_host import docker_client, docker_host

PING_TIMEOUT_S = 3


@dataclass(frozen=True)
class DockerStatus:
    host: str  # the daemon address tried: $DOCKER_HOST, else the default socket
    cli_path: str | None
    reachable: bool
    info: dict[str, object] | None  # `docker info` of a reachable daemon
    error: str | None  # why the daemon could not be reached
    blockers: tuple[Blocker, ...]


def check_docker() -> DockerStatus:
    # NOTE (issue 30): imported here, not at the top: the docker SDK (and requests under it)
    # is a tenth of the supervisor's boot, and a process-runtime start never asks for it.
    from docker.errors import DockerException

    host = docker_host()
    cli_path = shutil.which("docker")
    try:
        client = docker_client(PING_TIMEOUT_S)
        try:
            client.ping()
            info: dict[str, object] = client.info()
        finally:
            client.close()
    except DockerException as exc:
        error = str(exc)
        blocker = _unreachable(host, cli_path, error)
        return DockerStatus(host, cli_path, False, None, error, (blocker,))
    return DockerStatus(host, cli_path, True, info, None, ())


def _unreachable(host: str, cli_path: str | None, error: str) -> Blocker:
    if cli_path is None:
        return Blocker(
            id="docker-not-installed",
            title="Docker is not installed",
            explanation=(
                f"There is no `docker` command on PATH and no Docker daemon answers at {host}, "
                "so engines cannot run in containers. The process runtime still works."
            ),
            fix_steps=(
                "Install Docker Engine (Debian/Ubuntu: `sudo apt-get install docker.io`).",
                "Start it: `sudo systemctl start docker`.",
                "Check it with `docker info`, then run `gomgr doctor` again.",
            ),
            severity="blocks",
            blocks=("docker",),
        )
    if "Permission denied" in error:
        return Blocker(
            id="docker-permission-denied",
            title=f"No permission to use the Docker daemon at {host}",
            explanation=(
                f"The daemon socket {host} exists but this user may not open it ({error})."
            ),
            fix_steps=(
                "Add yourself to the docker group: `sudo usermod -aG docker $USER`.",
                "Log out and back in (or run `newgrp docker`).",
                "Check it with `docker info`, then run `gomgr doctor` again.",
            ),
            severity="blocks",
            blocks=("docker",),
        )
    return Blocker(
        id="docker-daemon-unreachable",
        title=f"No Docker daemon at {host}",
        explanation=(
            f"The `docker` command is installed ({cli_path}) but no daemon answered at {host} "
            f"within {PING_TIMEOUT_S} s ({error}). Engines cannot run in containers; the "
            "process runtime still works."
        ),
        fix_steps=(
            "Start the daemon: `sudo systemctl start docker` (or `sudo dockerd &`).",
            (
                "If it listens elsewhere, set DOCKER_HOST to its address, e.g. "
                "`export DOCKER_HOST=unix:///run/user/$UID/docker.sock` for rootless Docker."
            ),
            "Check it with `docker info`, then run `gomgr doctor` again.",
        ),
        severity="blocks",
        blocks=("docker",),
    )
