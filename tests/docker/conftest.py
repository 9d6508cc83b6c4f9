"""A real Docker daemon (`bash .ci/dockerd.sh up`) and the CPU engine image, built once.

Without a daemon these tests skip, except where $GOMGR_REQUIRE_DOCKER=1 (CI sets it), where
a missing daemon fails them: CI must never pass by skipping the Docker path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import httpx
import pytest
from docker import DockerClient
from docker.errors import DockerException

from manager.images.build import DEFAULT_TAG
from manager.runtimes.docker import LABEL_STATE_ROOT
from manager.state.paths import StatePaths
from router.daemon import RouterDaemon
from tests.docker.engine_image import build_cpu_engine_image
from tests.support.engine_process import free_port

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
class DockerEnv:
    """gomgr's state, router port and token in tmp dirs, against the session's daemon."""

    vars: dict[str, str]
    state: StatePaths
    router_port: int
    client: DockerClient

    @property
    def router_url(self) -> str:
        return f"http://127.0.0.1:{self.router_port}"

    def gomgr(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(GOMGR), *args], capture_output=True, text=True, env=self.vars, timeout=600,
            check=False,
        )

    def start(self, *args: str) -> dict[str, Any]:
        result = self.gomgr("start", *args, "--json")
        assert result.returncode == 0, result.stderr
        return dict(json.loads(result.stdout)) | {"stderr": result.stderr}

    def ps(self) -> list[dict[str, Any]]:
        result = self.gomgr("ps", "--json")
        assert result.returncode == 0, result.stderr
        return list(json.loads(result.stdout))

    def routed_models(self) -> list[str]:
        reply = httpx.get(f"{self.router_url}/v1/models", timeout=5)
        return [card["id"] for card in reply.json()["data"]]

    def containers(self) -> list[Any]:
        """Every container of this env, running or not."""
        label = f"{LABEL_STATE_ROOT}={self.state.root}"
        return list(self.client.containers.list(all=True, filters={"label": label}))

    def daemon(self) -> RouterDaemon:
        return RouterDaemon(
            self.state.router_dir, "127.0.0.1", self.router_port,
            Path(self.vars["GOMGR_ROUTER_TOKEN_FILE"]),
        )


@pytest.fixture(scope="module")
def docker_env(
    tmp_path_factory: pytest.TempPathFactory, smollm2_dir: Path, docker_client: DockerClient,
) -> Iterator[DockerEnv]:
    root = tmp_path_factory.mktemp("docker")
    port = free_port()
    variables = {
        **os.environ,
        "GOMGR_STATE_DIR": str(root / "state"),
        "GOMGR_CONFIG_DIR": str(root / "config"),
        "GOMGR_ROUTER_PORT": str(port),
        "GOMGR_ROUTER_TOKEN_FILE": str(root / "router.token"),
        "GOMGR_MODELS_DIR": str(smollm2_dir.parents[1]),
    }
    env = DockerEnv(variables, StatePaths(root / "state"), port, docker_client)
    yield env
    for container in env.containers():
        container.remove(force=True)
    env.daemon().stop()
