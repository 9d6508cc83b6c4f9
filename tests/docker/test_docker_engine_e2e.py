"""The main path for real: `gomgr start --runtime docker` with the CPU engine image on a
real dockerd, the router, the official openai client, a crash, a restart and a stop.

Tests run in file order on one module env; each leaves what the next expects.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from docker.errors import NotFound
from openai import OpenAI

from manager.state.records import RecordStore
from tests.conftest import SMOLLM2_REPO
from tests.docker.conftest import DockerEnv

pytestmark = [pytest.mark.slow, pytest.mark.docker]

SHM_32G = 32 * 1024**3


@pytest.fixture(scope="module")
def started(docker_env: DockerEnv, engine_image: str) -> dict[str, Any]:
    return docker_env.start(SMOLLM2_REPO, "--runtime", "docker")


def test_the_container_runs_with_the_exact_run_spec(
    docker_env: DockerEnv, started: dict[str, Any], smollm2_dir: Path
) -> None:
    assert started["runtime"] == "docker" and started["state"] == "ready"
    assert "runtime: docker (requested with --runtime docker" in started["stderr"]
    [container] = docker_env.containers()
    host = container.attrs["HostConfig"]
    assert host["ShmSize"] == SHM_32G
    assert host["Init"] is True
    assert host["PortBindings"] == {
        "30000/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(started["port"])}]
    }
    assert not host.get("DeviceRequests")  # no --gpus on a machine without GPUs
    [mount] = container.attrs["Mounts"]
    assert (mount["Source"], mount["Destination"], mount["RW"]) == (str(smollm2_dir), "/model", False)
    labels = container.labels
    assert labels["gomgr.engine-id"] == started["id"]
    assert labels["gomgr.model"] == SMOLLM2_REPO
    assert labels["gomgr.served-name"] == started["served_name"]
    command = container.attrs["Config"]["Cmd"]
    assert command[command.index("--model-path") + 1] == "/model"
    assert command[command.index("--served-model-name") + 1] == started["served_name"]
    assert "--trust-remote-code" in command
    config = container.attrs["Config"]  # the image's: a non-root user, port, entrypoint
    assert config["User"] == "engine"
    assert "30000/tcp" in config["ExposedPorts"]
    assert config["Entrypoint"] == ["python3", "-m", "engine.launch_server"]
    reply = httpx.get(f"http://127.0.0.1:{started['port']}/health", timeout=5)
    assert reply.status_code == 200


def test_the_image_healthcheck_reports_healthy(docker_env: DockerEnv, started: dict[str, Any]) -> None:
    [container] = docker_env.containers()
    deadline = time.monotonic() + 60  # NOTE: the check runs every 10 s; a bound, not a speed
    status = ""
    while time.monotonic() < deadline:
        container.reload()
        status = container.attrs["State"].get("Health", {}).get("Status", "")
        if status == "healthy":
            break
        time.sleep(1)
    assert status == "healthy"


def test_openai_client_chats_through_the_router(docker_env: DockerEnv, started: dict[str, Any]) -> None:
    client = OpenAI(base_url=f"{docker_env.router_url}/v1", api_key="any")
    reply = client.chat.completions.create(
        model=started["served_name"],
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=16, temperature=0,
    )
    assert "Paris" in (reply.choices[0].message.content or "")
    assert docker_env.routed_models() == [started["served_name"]]
    status = docker_env.gomgr("router", "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["backends"] == [started["id"]]


def test_docker_kill_drops_the_route_within_2s_and_ps_removes_the_container(
    docker_env: DockerEnv, started: dict[str, Any]
) -> None:
    [container] = docker_env.containers()
    container.kill()
    # NOTE: the router's monitor drops the route by itself (docker-proxy is gone, so the
    # connection is refused); 2 s is the bound the design promises, polled.
    deadline = time.monotonic() + 2
    while docker_env.routed_models() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert docker_env.routed_models() == []
    assert docker_env.ps() == []  # the manager's next command reclaims the dead engine
    with pytest.raises(NotFound):
        docker_env.client.containers.get(container.id)
    assert docker_env.containers() == []
    assert RecordStore(docker_env.state).get(started["id"]) is None


def test_start_again_then_stop_leaves_no_container_and_no_route(
    docker_env: DockerEnv, engine_image: str
) -> None:
    again = docker_env.start(SMOLLM2_REPO, "--runtime", "docker")
    [row] = docker_env.ps()
    assert (row["id"], row["runtime"], row["routed"]) == (again["id"], "docker", True)
    result = docker_env.gomgr("stop", again["id"])
    assert result.returncode == 0, result.stderr
    assert docker_env.containers() == []
    assert docker_env.routed_models() == []
    assert docker_env.ps() == []
