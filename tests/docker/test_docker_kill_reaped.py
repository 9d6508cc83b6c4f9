"""`docker kill` of an engine container (issue #23 done-when), real dockerd: the supervisor
(the background router `gomgr start` runs) drops the route within 2 s and removes the exited
container and its record within 10 s, with no `gomgr` command run in between."""

from __future__ import annotations

import time
from typing import Any

import pytest
from docker.errors import NotFound

from manager.state.records import RecordStore
from tests.conftest import SMOLLM2_REPO
from tests.docker.conftest import DockerEnv

pytestmark = [pytest.mark.slow, pytest.mark.docker]

ROUTE_GONE_S = 2.0
CONTAINER_GONE_S = 10.0


@pytest.fixture(scope="module")
def started(docker_env: DockerEnv, engine_image: str) -> dict[str, Any]:
    return docker_env.start(SMOLLM2_REPO, "--runtime", "docker")


def test_docker_kill_is_reaped_by_the_supervisor_alone(
    docker_env: DockerEnv, started: dict[str, Any]
) -> None:
    assert docker_env.routed_models() == [started["served_name"]]
    [container] = docker_env.containers()
    docker_env.client.api.kill(container.id)  # NOTE: the SDK's `docker kill`
    killed = time.monotonic()
    while docker_env.routed_models():
        assert time.monotonic() - killed < ROUTE_GONE_S, "the route outlived the container"
        time.sleep(0.05)
    while _exists(docker_env, container.id):
        assert time.monotonic() - killed < CONTAINER_GONE_S, "the exited container stayed"
        time.sleep(0.1)
    assert docker_env.containers() == []
    assert RecordStore(docker_env.state).get(started["id"]) is None
    log = docker_env.daemon().log_path.read_text(errors="replace")
    assert f"engine {started['id']} ({started['served_name']}, docker) died with exit code 137" in log


def _exists(docker_env: DockerEnv, container_id: str) -> bool:
    try:
        docker_env.client.containers.get(container_id)
    except NotFound:
        return False
    return True
