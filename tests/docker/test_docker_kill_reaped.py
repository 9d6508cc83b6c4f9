"""`docker kill` of an engine container (issue #23 done-when), real dockerd: the supervisor
(the background router `gomgr start` runs) drops the route within 2 s and removes the exited
container and its record within 10 s, with no `gomgr` command run in between; and the docker
runtime's exit stream (Docker's die events) that wakes it."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from docker import DockerClient
from docker.errors import NotFound

from manager.runtimes.base import EngineExit
from manager.runtimes.docker import LABEL_ENGINE_ID, LABEL_STATE_ROOT, DockerRuntime
from manager.state.paths import StatePaths
from manager.state.records import RecordStore
from tests.conftest import SMOLLM2_REPO
from tests.docker.conftest import DockerEnv
from tests.docker.engine_image import BASE_IMAGE

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
    told = f"engine {started['id']} ({started['served_name']}, docker) died with exit code 137"
    while told not in docker_env.daemon().log_path.read_text(errors="replace"):
        assert time.monotonic() - killed < CONTAINER_GONE_S, "no log line said what died"
        time.sleep(0.1)


def test_the_exit_stream_reports_our_killed_containers_only(
    docker_client: DockerClient, tmp_path: Path
) -> None:
    runtime = DockerRuntime(StatePaths(tmp_path / "ours"))
    stream = runtime.exits()
    seen: list[EngineExit] = []
    reader = threading.Thread(target=lambda: seen.extend(stream), daemon=True)
    reader.start()
    containers = [
        docker_client.containers.run(
            BASE_IMAGE, ["sleep", "60"], detach=True,
            labels={LABEL_ENGINE_ID: engine_id, LABEL_STATE_ROOT: str(root)},
        )
        for engine_id, root in (("theirs", tmp_path / "theirs"), ("ours", runtime.paths.root))
    ]
    try:
        for container in containers:  # NOTE: theirs first: its death must not be reported
            container.kill()
        deadline = time.monotonic() + CONTAINER_GONE_S
        while not seen:
            assert time.monotonic() < deadline, "no die event came"
            time.sleep(0.05)
        stream.close()
        reader.join(CONTAINER_GONE_S)
        assert not reader.is_alive()  # NOTE: close() from another thread ends the stream
        assert seen == [EngineExit("ours", 137)]
    finally:
        stream.close()
        for container in containers:
            container.remove(force=True)


def _exists(docker_env: DockerEnv, container_id: str) -> bool:
    try:
        docker_env.client.containers.get(container_id)
    except NotFound:
        return False
    return True
