"""The docker runtime's exit stream (Docker's die events), real dockerd: what wakes the
supervisor's reaper when an engine container dies (the `docker kill` of an engine it reaps
is tests/docker/test_docker_engine_e2e.py's, on that file's engine)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from docker import DockerClient

from manager.runtimes.base import EngineExit
from manager.runtimes.docker import LABEL_ENGINE_ID, LABEL_STATE_ROOT, DockerRuntime
from manager.state.paths import StatePaths
from tests.docker.engine_image import BASE_IMAGE

pytestmark = [pytest.mark.slow, pytest.mark.docker]

DIE_EVENT_S = 10.0


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
        deadline = time.monotonic() + DIE_EVENT_S
        while not seen:
            assert time.monotonic() < deadline, "no die event came"
            time.sleep(0.05)
        stream.close()
        reader.join(DIE_EVENT_S)
        assert not reader.is_alive()  # NOTE: close() from another thread ends the stream
        assert seen == [EngineExit("ours", 137)]
    finally:
        stream.close()
        for container in containers:
            container.remove(force=True)

