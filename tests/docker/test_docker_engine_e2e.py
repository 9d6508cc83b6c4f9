"""The main path for real: `gomgr start --runtime docker` with the CPU engine image on a
real dockerd, the router, the official openai client, a `docker kill` the supervisor reaps
by itself, a start again and a stop.

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
ROUTE_GONE_S = 2.0
CONTAINER_GONE_S = 10.0


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


def test_docker_kill_is_reaped_by_the_supervisor_alone(
    docker_env: DockerEnv, started: dict[str, Any]
) -> None:
    """Issue #23 done-when: the supervisor (the background router `gomgr start` runs) drops
    the route within 2 s and removes the exited container and its record within 10 s, with
    no `gomgr` command run in between."""
    [container] = docker_env.containers()
    docker_env.client.api.kill(container.id)  # NOTE: the SDK's `docker kill`
    killed = time.monotonic()
    # NOTE: the bounds the design promises, polled, not speed measurements.
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
    assert docker_env.ps() == []


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


def _exists(docker_env: DockerEnv, container_id: str) -> bool:
    try:
        docker_env.client.containers.get(container_id)
    except NotFound:
        return False
    return True
