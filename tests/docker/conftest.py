"""A real Docker daemon (`bash .ci/dockerd.sh up`) and the CPU engine image, built once.

Without a daemon these tests skip, except where $GOMGR_REQUIRE_DOCKER=1 (CI sets it), where
a missing daemon fails them: CI must never pass by skipping the Docker path.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest
from docker import DockerClient
from docker.errors import DockerException

from manager.images.build import DEFAULT_TAG
from manager.runtimes.docker import LABEL_STATE_ROOT
from tests.docker.engine_image import build_cpu_engine_image
from tests.support.gomgr_env import Env

GOMGR = Path(sys.executable).parent / "gomgr"
REQUIRE_ENV = "GOMGR_REQUIRE_DOCKER"


@pytest.fixture(scope="session")
def docker_client() -> Iterator[DockerClient]:
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except DockerException as exc:
        why = f"no Docker daemon ({exc}); run `bash .ci/dockerd.sh up` and export DOCKER_HOST"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(why)
        pytest.skip(why)
    yield client
    client.close()


@pytest.fixture(scope="session")
def engine_image(docker_client: DockerClient) -> str:
    """gomgr-engine:latest, built by the real `gomgr image build` (layer cache: fast again)."""
    result = build_cpu_engine_image()
    assert result.returncode == 0, result.stderr[-4000:]
    return DEFAULT_TAG


@dataclass(frozen=True)
class DockerEnv(Env):
    """An isolated manager (tests/support/gomgr_env.py) against the session's daemon."""

    client: DockerClient

    def containers(self) -> list[Any]:
        """Every container of this env, running or not."""
        label = f"{LABEL_STATE_ROOT}={self.state.root}"
        return list(self.client.containers.list(all=True, filters={"label": label}))


@pytest.fixture(scope="module")
def docker_env(
    tmp_path_factory: pytest.TempPathFactory, smollm2_dir: Path, docker_client: DockerClient,
) -> Iterator[DockerEnv]:
    base = Env.isolated(tmp_path_factory.mktemp("docker"), smollm2_dir.parents[1])
    env = DockerEnv(base.vars, base.state, base.router_port, docker_client)
    yield env
    for container in env.containers():
        container.remove(force=True)
    env.end_everything()
